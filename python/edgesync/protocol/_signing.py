"""Signed downlink controls (see docs/protocol.md, "Signed controls").

A signed control is the ordinary control object plus ``sig_seq`` (per-device,
strictly increasing), ``expires_at`` (RFC 3339 UTC) and ``signature``: the
lowercase hex HMAC-SHA256, keyed by the device's auth token, of the canonical
JSON (keys sorted, no whitespace) of every other field.
"""

from __future__ import annotations

import hashlib
import hmac
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from edgesync.errors import ControlRejected

__all__ = ["SIGNATURE_FIELDS", "canonical_control", "sign_control", "verify_control"]

SIGNATURE_FIELDS = ("sig_seq", "expires_at", "signature")


def canonical_control(doc: dict[str, Any]) -> bytes:
    unsigned = {k: v for k, v in doc.items() if k != "signature"}
    return orjson.dumps(unsigned, option=orjson.OPT_SORT_KEYS)


def _mac(key: bytes, doc: dict[str, Any]) -> str:
    return hmac.new(key, canonical_control(doc), hashlib.sha256).hexdigest()


def sign_control(body: dict[str, Any], key: bytes, *, seq: int, ttl: timedelta,
                 now: datetime | None = None) -> dict[str, Any]:
    expires = (now or datetime.now(UTC)) + ttl
    doc = {**body, "sig_seq": seq,
           "expires_at": expires.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
    doc["signature"] = _mac(key, doc)
    return doc


def verify_control(doc: dict[str, Any], key: bytes, *, last_seq: int,
                   now: datetime | None = None) -> int:
    """Check a control; returns its ``sig_seq`` (to persist as the new ``last_seq``).

    Raises ControlRejected with reason ``unsigned``, ``bad_signature``, ``expired`` or
    ``replayed``. The signature is checked first, so an attacker learns nothing from
    the other answers.
    """
    sig = doc.get("signature")
    if not isinstance(sig, str) or any(f not in doc for f in SIGNATURE_FIELDS):
        raise ControlRejected("unsigned", "control carries no signature, sig_seq or expires_at")
    if not hmac.compare_digest(sig, _mac(key, doc)):
        raise ControlRejected("bad_signature", f"control {doc.get('control_id')} is forged")
    seq = doc["sig_seq"]
    if not isinstance(seq, int) or isinstance(seq, bool):
        raise ControlRejected("bad_signature", "sig_seq is not an integer")
    try:
        expires = datetime.fromisoformat(str(doc["expires_at"]).replace("Z", "+00:00"))
    except ValueError as exc:
        raise ControlRejected("bad_signature", "expires_at is not a timestamp") from exc
    if expires.tzinfo is None:
        raise ControlRejected("bad_signature", "expires_at has no time zone")
    if (now or datetime.now(UTC)) >= expires:
        raise ControlRejected("expired", f"control {doc.get('control_id')} expired {expires}")
    if seq <= last_seq:
        raise ControlRejected("replayed", f"sig_seq {seq} is not after {last_seq}")
    return seq
