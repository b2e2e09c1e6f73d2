"""The JSON envelopes every route answers with: ``{"data": ...}`` for one object,
``{"data": [...], "meta": {...}}`` for a page, ``{"error": {...}}`` for a failure."""

from __future__ import annotations

from typing import Generic, TypeVar

from pydantic import BaseModel, Field, SerializeAsAny

__all__ = ["ErrorDetail", "ErrorEnvelope", "Item", "Page", "PageMeta", "RefusalOut",
           "RefusedDetail"]

T = TypeVar("T")


class ErrorDetail(BaseModel):
    code: str = Field(description="stable, machine-readable error code")
    message: str = Field(description="human-readable explanation")
    field: str | None = Field(None, description="the request part the error is about, if any")


class RefusalOut(BaseModel):
    """Why an approval with these column actions is refused, for one column."""

    source_column_name: str | None = Field(
        description="the source column (null: about the actions as a whole)")
    code: str = Field(description="stable refusal code, e.g. type_conflict, name_taken")
    detail: str
    fix: str = Field(description="what to change so the approval passes")
    field: str = Field(description="the request part, e.g. column_actions[2].mirror_column_name")


class RefusedDetail(ErrorDetail):
    """A refused approval's error: every refusal, as the preview lists them."""

    refusals: list[RefusalOut]


class ErrorEnvelope(BaseModel):
    # SerializeAsAny: a refused approval's RefusedDetail keeps its refusals; every other
    # error is the three fields it always was.
    error: SerializeAsAny[ErrorDetail]


class PageMeta(BaseModel):
    page: int = Field(ge=1)
    limit: int = Field(ge=1)
    total: int = Field(ge=0, description="items across all pages")


class Item(BaseModel, Generic[T]):
    data: T


class Page(BaseModel, Generic[T]):
    data: list[T]
    meta: PageMeta
