"""Passwords in Mosquitto's ``$7$`` (PBKDF2-SHA512) format, checked against
``mosquitto_passwd``; tests/broker shows the broker accepting them."""

from __future__ import annotations

import base64
import shutil
import subprocess
from pathlib import Path

import pytest

from edgesync.credentials import hash_password, new_password, verify_password

MOSQUITTO_PASSWD = shutil.which("mosquitto_passwd") or "/usr/bin/mosquitto_passwd"


def test_format_and_round_trip() -> None:
    pw = new_password()
    digest = hash_password(pw)
    _, seven, iterations, salt, key = digest.split("$")
    assert (seven, iterations) == ("7", "101")
    assert len(base64.b64decode(salt)) == 12 and len(base64.b64decode(key)) == 64
    assert verify_password(pw, digest)
    assert not verify_password(pw + "x", digest)
    assert not verify_password(pw, "$6$abc$def")
    assert hash_password(pw) != digest  # fresh salt each time


def test_matches_mosquitto_passwd(tmp_path: Path) -> None:
    if not Path(MOSQUITTO_PASSWD).exists():
        pytest.fail("mosquitto_passwd is not installed")
    path = tmp_path / "passwd"
    subprocess.run([MOSQUITTO_PASSWD, "-c", "-b", str(path), "dev-a", "s3cret"], check=True)
    user, theirs = path.read_text().strip().split(":", 1)
    assert user == "dev-a"
    assert verify_password("s3cret", theirs)
    salt = base64.b64decode(theirs.split("$")[3])
    assert hash_password("s3cret", salt=salt) == theirs


def test_generated_passwords_are_long_and_url_safe() -> None:
    pws = {new_password() for _ in range(50)}
    assert len(pws) == 50
    assert all(len(p) >= 43 and p.replace("-", "").replace("_", "").isalnum() for p in pws)
