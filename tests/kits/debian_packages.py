"""Debian packages a test needs (Chromium for the console, tmux for the terminal UI),
installed with apt-get when their commands are missing.

pytest runs on several worker processes (xdist), and two of them may need a package at
the same moment: dpkg takes one installer at a time and refuses the second ("Could not
get lock /var/lib/dpkg/lock-frontend"). Installers of this suite take turns on a file
lock, and the commands are looked for again once it is held (the other worker may have
installed them meanwhile); apt-get itself waits for an installer outside the suite.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

_LOCK = Path(tempfile.gettempdir()) / "edgesync-tests-apt.lock"
_ENV = {"DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
# Seconds apt-get waits for dpkg's lock held by a process outside the suite.
_DPKG_WAIT = ["-o", "DPkg::Lock::Timeout=600"]


def ensure_commands(commands: list[str], packages: list[str]) -> None:
    """Every one of ``commands`` on PATH, installing ``packages`` when one is missing;
    fails the test (never skips it) when that is not possible."""
    if all(shutil.which(c) for c in commands):
        return
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        pytest.fail(f"{', '.join(commands)} needed: apt-get install -y {' '.join(packages)}")
    with open(_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed
        if all(shutil.which(c) for c in commands):
            return
        for argv in (["apt-get", *_DPKG_WAIT, "update", "-q"],
                     ["apt-get", *_DPKG_WAIT, "install", "-y", "-q", *packages]):
            out = subprocess.run(argv, capture_output=True, text=True, env=_ENV, timeout=900,
                                 check=False)
            assert out.returncode == 0, f"{' '.join(argv)} failed: {out.stderr[-2000:]}"
    missing = [c for c in commands if shutil.which(c) is None]
    assert not missing, f"apt-get installed {packages} but {missing} are still not on PATH"
