"""Rows as the packages' frozen dataclasses: each package owns the type of what it
returns (a ``Review``, a ``SyncPolicy``, …); this fills one from a row's columns of the
same names, so a query and its type cannot drift apart silently (a missing column is a
``KeyError`` naming it)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import asyncpg

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    T = TypeVar("T", bound=DataclassInstance)
else:
    T = TypeVar("T")

__all__ = ["from_record"]


def from_record(cls: type[T], rec: asyncpg.Record | Mapping[str, Any], /, **given: Any) -> T:
    """``cls`` with each field from the column of its name; ``given`` fields win (a value
    the query does not select, or one converted first, such as an enum)."""
    return cls(**{f.name: given[f.name] if f.name in given else rec[f.name]
                  for f in dataclasses.fields(cls) if f.init})
