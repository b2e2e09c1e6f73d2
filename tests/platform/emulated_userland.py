"""A Debian 12 userland of another architecture (ci/userland.sh made it), whose programs
run here under qemu-user through binfmt_misc: each command in a chroot of its own mount
namespace, with /proc, /dev, an empty /tmp and the host directories it is given mounted at
the same paths inside as outside (so a path means the same on both sides: a config file,
a SQLite file, a venv). The network is the host's: 127.0.0.1 is this machine's PostgreSQL,
Mosquitto and ``edgesync serve``.

Which architectures are ready is decided here (root, binfmt registration, userland,
wheel); a test skips with that reason, unless ``EDGESYNC_EMULATED_REQUIRE`` names the
architecture (ci/test.sh names aarch64): then it fails instead.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).parents[2]
CACHE = Path(os.environ.get("EDGESYNC_CI_CACHE", Path.home() / ".cache" / "edgesync-ci"))
# The userland's PATH; nothing else of the host's environment goes in.
PATH = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"

# Mounts, then the command. Arguments: root, host directories to mount, "--", command.
_ENTER = r"""
set -e
root=$1; shift
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
mount -t tmpfs tmpfs "$root/tmp"
while [ "$1" != "--" ]; do mkdir -p "$root$1"; mount --bind "$1" "$root$1"; shift; done
shift
exec chroot "$root" "$@"
"""


@dataclass(frozen=True)
class Arch:
    name: str  # as in wheel tags and `uname -m`
    debian: str  # Debian's name, as ci/userland.sh takes it
    qemu: str  # the binfmt_misc entry
    wheel_tag: str

    @property
    def root(self) -> Path:
        return CACHE / f"userland-{self.debian}"

    def wheel(self) -> Path | None:
        found = sorted((REPO / "dist").glob(f"edgesync-*-{self.wheel_tag}.whl"))
        return found[-1] if found else None

    def unavailable(self) -> str | None:
        """Why this architecture cannot be run here, or None."""
        if os.geteuid() != 0:
            return "needs root (binfmt_misc, mount namespaces, chroot)"
        if not Path(f"/proc/sys/fs/binfmt_misc/qemu-{self.qemu}").exists():
            return f"qemu-{self.qemu} is not registered with binfmt_misc " \
                   f"(bash ci/userland.sh {self.debian})"
        if not (self.root / ".edgesync-userland").exists():
            return f"no {self.debian} userland at {self.root} (bash ci/userland.sh {self.debian})"
        if self.wheel() is None:
            return f"no {self.wheel_tag} wheel in dist/ (bash ci/wheels.sh)"
        return None


ARCHES = {a.name: a for a in (
    Arch("aarch64", "arm64", "aarch64", "manylinux_2_28_aarch64"),
    Arch("armv7l", "armhf", "arm", "manylinux_2_28_armv7l"),
)}


def require_ready(arch: Arch) -> None:
    """Skip (or, for a required architecture, fail) when ``arch`` cannot be run here."""
    reason = arch.unavailable()
    if reason is None:
        return
    required = os.environ.get("EDGESYNC_EMULATED_REQUIRE", "").split(",")
    if arch.name in required:
        pytest.fail(f"{arch.name} is required (EDGESYNC_EMULATED_REQUIRE) but {reason}")
    pytest.skip(f"emulated {arch.name}: {reason}")


@dataclass(frozen=True)
class Userland:
    arch: Arch
    mounts: tuple[Path, ...]

    def argv(self, command: Sequence[str], env: Mapping[str, str] | None = None) -> list[str]:
        """``command`` run inside, with only ``env`` (and PATH, HOME) in its environment."""
        environ = {"PATH": PATH, "HOME": "/root", "LANG": "C.UTF-8", **(env or {})}
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", _ENTER, "sh",
                str(self.arch.root), *map(str, self.mounts), "--",
                "/usr/bin/env", "-i", *(f"{k}={v}" for k, v in environ.items()), *command]

    def run(self, command: Sequence[str], *, env: Mapping[str, str] | None = None,
            timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.argv(command, env), capture_output=True, text=True,
                              timeout=timeout, check=False)

    def popen(self, command: Sequence[str], log: Path,
              env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
        """A long-running process: the chain of execs keeps one pid, so the returned
        process is the emulated program itself (its signals, its /proc status)."""
        with log.open("wb") as out:
            return subprocess.Popen(self.argv(command, env), stdout=out,
                                    stderr=subprocess.STDOUT)


def rss_kib(pid: int) -> int:
    """Resident memory of a process; under emulation that of qemu and its guest together."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for pid {pid}")


def disk_mb(path: Path) -> float:
    """Disk blocks under ``path`` as ``du`` counts them, in MB."""
    return sum(p.lstat().st_blocks * 512 for p in path.rglob("*")) / 1e6
