"""Is each wheel's platform tag true? Every ELF file in it is read (pyelftools) and
checked against the tag in its file name:

- the ELF machine is the tag's architecture (armv7l: 32-bit ARM, hard-float ABI);
- manylinux_X_Y: it needs only libraries the manylinux policy allows (libc, libpthread,
  libdl, libm, librt, libgcc_s, the dynamic loader) and no glibc symbol version newer
  than X.Y;
- musllinux_1_2: it needs only musl's libc (``libc.so``, the name musl's loader takes as
  itself, as auditwheel's musllinux policy has it) and no glibc symbol version at all.

auditwheel cannot read a musl wheel on a glibc machine, so this check is the one that
covers both; ci/wheels.sh runs ``auditwheel show`` on the manylinux ones as well.
Prints one line per wheel (tag, machine, NEEDED, newest glibc version, size) and exits 1
when any tag is false.

Usage: python ci/check_wheel.py WHEEL...
"""

from __future__ import annotations

import io
import re
import sys
import zipfile
from pathlib import Path

from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerNeedSection

# ELF e_machine of each architecture in a platform tag.
MACHINE = {"x86_64": "EM_X86_64", "aarch64": "EM_AARCH64", "armv7l": "EM_ARM"}
EF_ARM_ABI_FLOAT_HARD = 0x400
MANYLINUX_LIBS = {"libc.so.6", "libpthread.so.0", "libdl.so.2", "libm.so.6", "librt.so.1",
                  "libgcc_s.so.1", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1",
                  "ld-linux-armhf.so.3"}
MUSL_LIBS = {"libc.so"}
TAG = re.compile(r"^(manylinux|musllinux)_(\d+)_(\d+)_(x86_64|aarch64|armv7l)$")


def version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split("."))


def platform_tags(wheel: Path) -> list[str]:
    # name-version-python-abi-platform.whl; a platform part may hold several tags.
    return wheel.name.removesuffix(".whl").split("-")[-1].split(".")


def check_elf(data: bytes, family: str, limit: tuple[int, int], arch: str) -> tuple[
        str, list[str], str, list[str]]:
    """(ELF machine, NEEDED, newest glibc version or '-', problems) of one ELF file."""
    elf = ELFFile(io.BytesIO(data))
    problems = []
    if elf["e_machine"] != MACHINE[arch]:
        problems.append(f"machine {elf['e_machine']}, the tag says {arch}")
    if arch == "armv7l" and not elf["e_flags"] & EF_ARM_ABI_FLOAT_HARD:
        problems.append("not the hard-float ABI of armv7l (gnueabihf/musleabihf)")
    needed: list[str] = []
    glibc: list[tuple[int, ...]] = []
    for section in elf.iter_sections():
        if isinstance(section, DynamicSection):
            needed += [t.needed for t in section.iter_tags() if t.entry.d_tag == "DT_NEEDED"]
        if isinstance(section, GNUVerNeedSection):
            for _, auxes in section.iter_versions():
                glibc += [version(a.name.removeprefix("GLIBC_")) for a in auxes
                          if a.name.startswith("GLIBC_") and a.name[6:7].isdigit()]
    allowed = MANYLINUX_LIBS if family == "manylinux" else MUSL_LIBS
    if stray := sorted(set(needed) - allowed):
        problems.append(f"needs {stray}, outside the {family} policy")
    newest = max(glibc, default=None)
    if family == "musllinux" and glibc:
        problems.append(f"needs glibc symbol versions (newest GLIBC_{fmt(newest)})")
    if family == "manylinux" and newest is not None and newest > limit:
        problems.append(f"needs GLIBC_{fmt(newest)}, newer than {fmt(limit)}")
    return elf["e_machine"], needed, fmt(newest) if newest else "-", problems


def fmt(v: tuple[int, ...] | None) -> str:
    return ".".join(map(str, v or ()))


def check_wheel(wheel: Path) -> list[str]:
    problems = []
    with zipfile.ZipFile(wheel) as zf:
        for tag in platform_tags(wheel):
            m = TAG.match(tag)
            if m is None:
                problems.append(f"{tag}: not a manylinux/musllinux tag this project builds")
                continue
            family, major, minor, arch = m[1], int(m[2]), int(m[3]), m[4]
            elves = [n for n in zf.namelist() if zf.read(n)[:4] == b"\x7fELF"]
            if not elves:
                problems.append(f"{tag}: no ELF file in the wheel")
            for name in elves:
                machine, needed, newest, bad = check_elf(zf.read(name), family,
                                                         (major, minor), arch)
                print(f"  {tag}: {name}: {machine}, NEEDED {needed}, newest glibc {newest}")
                problems += [f"{tag}: {name}: {p}" for p in bad]
    return problems


def main(wheels: list[str]) -> int:
    failed = False
    for w in map(Path, wheels):
        print(f"{w.name}: {w.stat().st_size / 1e6:.2f} MB")
        for p in check_wheel(w):
            failed = True
            print(f"  FALSE TAG {p}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
