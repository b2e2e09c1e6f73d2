"""MQTT passwords in Mosquitto's password-file format.

Mosquitto 2 (``mosquitto_passwd``'s default ``sha512-pbkdf2``) stores
``$7$<iterations>$<base64 salt>$<base64 PBKDF2-HMAC-SHA512(password, salt)>``: a 12-byte
salt, a 64-byte derived key, standard base64 with padding. The broker reads the
iteration count from each entry. Passwords are generated here (32 random bytes,
URL-safe), so their entropy — not the iteration count — is what resists guessing.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

__all__ = ["ITERATIONS", "hash_password", "new_password", "verify_password"]

ITERATIONS = 101  # mosquitto_passwd's own default
_SALT_BYTES = 12


def new_password() -> str:
    return secrets.token_urlsafe(32)


def hash_password(password: str, *, iterations: int = ITERATIONS,
                  salt: bytes | None = None) -> str:
    salt = salt if salt is not None else secrets.token_bytes(_SALT_BYTES)
    digest = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, iterations)
    return (f"$7${iterations}${base64.b64encode(salt).decode()}$"
            f"{base64.b64encode(digest).decode()}")


def verify_password(password: str, stored: str) -> bool:
    parts = stored.split("$")
    if len(parts) != 5 or parts[1] != "7":
        return False
    try:
        iterations = int(parts[2])
        salt = base64.b64decode(parts[3], validate=True)
        expected = base64.b64decode(parts[4], validate=True)
    except ValueError:
        return False
    digest = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, iterations)
    return hmac.compare_digest(digest, expected)
