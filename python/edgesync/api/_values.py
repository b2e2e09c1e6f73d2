"""Database values made JSON-safe the way the wire protocol writes them."""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

__all__ = ["json_value"]


def json_value(value: Any) -> Any:
    """bytea → ``{"$blob": hex}`` (as in row batches), numeric → string, non-finite
    floats → ``null``; everything else is left to the JSON encoder."""
    if isinstance(value, bytes | bytearray | memoryview):
        return {"$blob": bytes(value).hex()}
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, list):
        return [json_value(v) for v in value]
    return value
