"""``q``, the search text of list routes: a case-insensitive substring the queries match
with ``strpos`` (never LIKE, so ``%`` and ``_`` are themselves), applied before paging so
a console's search covers every page."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator

__all__ = ["MAX_SEARCH", "SearchText"]

MAX_SEARCH = 200


def _no_nul(value: str | None) -> str | None:
    # PostgreSQL text holds no NUL: refused here, not a 500 from the driver.
    if value is not None and "\x00" in value:
        raise ValueError("the search text cannot contain a NUL character (\\u0000): "
                         "remove it")
    return value


SearchText = Annotated[str | None, AfterValidator(_no_nul)]
