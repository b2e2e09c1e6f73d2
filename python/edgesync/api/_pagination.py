"""``page`` / ``limit`` query parameters, shared by every list route."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, TypeVar

from fastapi import Depends, Query

from edgesync.api._envelopes import Page, PageMeta

__all__ = ["Pagination", "Paging"]

T = TypeVar("T")
MAX_LIMIT = 500


@dataclass(frozen=True, slots=True)
class Pagination:
    page: int
    limit: int

    @property
    def offset(self) -> int:
        return (self.page - 1) * self.limit

    def of(self, items: list[T], total: int) -> Page[T]:
        return Page[T](data=items, meta=PageMeta(page=self.page, limit=self.limit, total=total))


def _pagination(
    page: Annotated[int, Query(ge=1, le=1_000_000, description="1-based page number")] = 1,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description="items per page")] = 50,
) -> Pagination:
    return Pagination(page, limit)


Paging = Annotated[Pagination, Depends(_pagination)]
