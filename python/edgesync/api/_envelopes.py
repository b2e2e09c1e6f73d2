"""The JSON envelopes every route answers with: ``{"data": ...}`` for one object,
``{"data": [...], "meta": {...}}`` for a page, ``{"error": {...}}`` for a failure."""

from __future__ import annotations

from typing import Generic, TypeVar

from pydantic import BaseModel, Field

__all__ = ["ErrorDetail", "ErrorEnvelope", "Item", "Page", "PageMeta"]

T = TypeVar("T")


class ErrorDetail(BaseModel):
    code: str = Field(description="stable, machine-readable error code")
    message: str = Field(description="human-readable explanation")
    field: str | None = Field(None, description="the request part the error is about, if any")


class ErrorEnvelope(BaseModel):
    error: ErrorDetail


class PageMeta(BaseModel):
    page: int = Field(ge=1)
    limit: int = Field(ge=1)
    total: int = Field(ge=0, description="items across all pages")


class Item(BaseModel, Generic[T]):
    data: T


class Page(BaseModel, Generic[T]):
    data: list[T]
    meta: PageMeta
