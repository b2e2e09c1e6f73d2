"""How API values look in the console: words for pause reasons, short cells, no markup
(device data may contain square brackets, which Textual would read as markup)."""

from __future__ import annotations

from typing import Any

import orjson
from rich.text import Text

__all__ = ["PAUSE_WORDS", "cell", "pause_words", "short_time", "text"]

PAUSE_WORDS = {
    "schema_review": "review required",
    "registry_review": "review required (registry)",
    "backpressure": "backpressure",
    "circuit_breaker": "circuit breaker",
    "deferred_columns": "deferred columns",
}


def pause_words(reason: str | None) -> str:
    if not reason:
        return "-"
    return PAUSE_WORDS.get(reason, reason.replace("_", " "))


def short_time(value: Any) -> str:
    """An RFC 3339 timestamp to the second, without the zone (the API answers in UTC)."""
    if not value:
        return "-"
    return str(value).replace("T", " ")[:19]


def text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, dict | list):
        return orjson.dumps(value).decode()
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def cell(value: Any, limit: int = 60) -> Text:
    s = text(value)
    return Text(s if len(s) <= limit else s[: limit - 1] + "…")
