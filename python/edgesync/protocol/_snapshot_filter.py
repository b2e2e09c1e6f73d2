"""The structured filter of a ``resnapshot`` control: which rows of a table to send again.

Never SQL text: the cloud sends terms, the device builds its own ``WHERE`` from them with
validated, quoted identifiers and bound values (``agent.jobs._resnapshot``). Both sides parse
a filter with ``parse_filter``, so the API refuses what a device would refuse.

    {"where": [{"column": "n", "op": "gt", "value": 5}, ...],    all terms must hold
     "key_range": {"from": {"id": 10}, "to": {"id": 500}},         from <= key < to
     "buckets": {"prefix": 2, "values": ["0a", "ff"]}}            by _edge_pk_hash prefix

A value is a JSON scalar or ``{"$blob": "<hex>"}``; ``in`` takes a list; ``is_null`` and
``not_null`` take none. A key range names every primary-key column, compared as one row
value in key order (SQLite's ``(k1, k2) >= (?, ?)``).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Any

from edgesync.errors import InvalidRequestError
from edgesync.protocol._table_digest import MAX_PREFIX

__all__ = ["FilterOp", "FilterTerm", "KeyRange", "SnapshotFilter", "parse_filter"]

MAX_TERMS = 32
MAX_IN_VALUES = 1000
_HEX = re.compile(r"^[0-9a-f]*$")


class FilterOp(enum.StrEnum):
    EQ = "eq"
    NE = "ne"
    LT = "lt"
    LE = "le"
    GT = "gt"
    GE = "ge"
    IN = "in"
    IS_NULL = "is_null"
    NOT_NULL = "not_null"


@dataclass(frozen=True, slots=True)
class FilterTerm:
    column: str
    op: FilterOp
    value: Any = None


@dataclass(frozen=True, slots=True)
class KeyRange:
    start: dict[str, Any] | None
    end: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class SnapshotFilter:
    terms: tuple[FilterTerm, ...] = ()
    key_range: KeyRange | None = None
    prefix: int = 0
    buckets: frozenset[str] = frozenset()

    @property
    def empty(self) -> bool:
        return not self.terms and self.key_range is None and not self.buckets

    def columns(self) -> set[str]:
        names = {t.column for t in self.terms}
        for side in (self.key_range.start, self.key_range.end) if self.key_range else ():
            names |= set(side or {})
        return names

    def doc(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.terms:
            out["where"] = [{"column": t.column, "op": t.op.value}
                            | ({} if t.op in _NO_VALUE else {"value": list(t.value)
                                                             if isinstance(t.value, tuple)
                                                             else t.value})
                            for t in self.terms]
        if self.key_range:
            out["key_range"] = {k: v for k, v in (("from", self.key_range.start),
                                                  ("to", self.key_range.end)) if v}
        if self.buckets:
            out["buckets"] = {"prefix": self.prefix, "values": sorted(self.buckets)}
        return out


_NO_VALUE = (FilterOp.IS_NULL, FilterOp.NOT_NULL)


def _scalar(value: Any, field: str) -> Any:
    if isinstance(value, dict):
        blob = value.get("$blob")
        if set(value) != {"$blob"} or not isinstance(blob, str) or len(blob) % 2 or \
                not _HEX.match(blob.lower()):
            raise InvalidRequestError(field, 'an object value must be {"$blob": "<hex>"}')
        return value
    if value is None or isinstance(value, bool | list):
        raise InvalidRequestError(field, "must be a number, a string or {\"$blob\": hex} "
                                         "(use op is_null for NULL)")
    if not isinstance(value, int | float | str):
        raise InvalidRequestError(field, "must be a number, a string or {\"$blob\": hex}")
    if isinstance(value, str) and "\0" in value:
        raise InvalidRequestError(field, "a string value cannot hold NUL (use a $blob)")
    if isinstance(value, int) and not -(1 << 63) <= value < (1 << 63):
        raise InvalidRequestError(field, "an integer must fit in 64 bits (SQLite INTEGER)")
    return value


def _term(raw: Any, field: str) -> FilterTerm:
    if not isinstance(raw, dict) or not isinstance(raw.get("column"), str) or \
            not raw["column"] or "\0" in raw["column"]:
        raise InvalidRequestError(field, 'must be {"column": NAME, "op": OP, "value": V}')
    try:
        op = FilterOp(str(raw.get("op")))
    except ValueError:
        raise InvalidRequestError(f"{field}.op", "must be one of "
                                  + ", ".join(o.value for o in FilterOp)) from None
    if op in _NO_VALUE:
        if raw.get("value") is not None:
            raise InvalidRequestError(f"{field}.value", f"op {op} takes no value")
        return FilterTerm(raw["column"], op)
    value = raw.get("value")
    if op is FilterOp.IN:
        if not isinstance(value, list) or not 1 <= len(value) <= MAX_IN_VALUES:
            raise InvalidRequestError(f"{field}.value",
                                      f"op in takes a list of 1 to {MAX_IN_VALUES} values")
        return FilterTerm(raw["column"], op, tuple(
            _scalar(v, f"{field}.value[{i}]") for i, v in enumerate(value)))
    return FilterTerm(raw["column"], op, _scalar(value, f"{field}.value"))


def _key(raw: Any, field: str) -> dict[str, Any] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or not raw:
        raise InvalidRequestError(field, "must be an object naming every primary-key column")
    if any("\0" in str(k) or not k for k in raw):
        raise InvalidRequestError(field, "column names must be non-empty, without NUL")
    return {str(k): _scalar(v, f"{field}.{k}") for k, v in raw.items()}


def parse_filter(raw: Any, *, columns: set[str] | None = None,
                 key: list[str] | None = None) -> SnapshotFilter:
    """A filter from its JSON form; ``InvalidRequestError`` naming the field. With
    ``columns`` (and ``key``, the primary key in order), names are checked too."""
    if raw is None:
        return SnapshotFilter()
    if not isinstance(raw, dict) or set(raw) - {"where", "key_range", "buckets"}:
        raise InvalidRequestError("filter", "may hold only where, key_range and buckets")
    where = raw.get("where") or []
    if not isinstance(where, list) or len(where) > MAX_TERMS:
        raise InvalidRequestError("filter.where", f"must be a list of at most {MAX_TERMS} terms")
    terms = tuple(_term(t, f"filter.where[{i}]") for i, t in enumerate(where))
    key_range = None
    if raw.get("key_range") is not None:
        kr = raw["key_range"]
        if not isinstance(kr, dict) or set(kr) - {"from", "to"} or not kr:
            raise InvalidRequestError("filter.key_range", 'must be {"from": {...}, "to": {...}}')
        key_range = KeyRange(_key(kr.get("from"), "filter.key_range.from"),
                             _key(kr.get("to"), "filter.key_range.to"))
    prefix, buckets = 0, frozenset[str]()
    if raw.get("buckets") is not None:
        b = raw["buckets"]
        values = b.get("values") if isinstance(b, dict) else None
        prefix = b.get("prefix") if isinstance(b, dict) else None  # type: ignore[assignment]
        if not isinstance(prefix, int) or isinstance(prefix, bool) or \
                not 1 <= prefix <= MAX_PREFIX:
            raise InvalidRequestError("filter.buckets.prefix",
                                      f"must be an integer from 1 to {MAX_PREFIX}")
        if not isinstance(values, list) or not values or not all(
                isinstance(v, str) and len(v) == prefix and _HEX.match(v) for v in values):
            raise InvalidRequestError("filter.buckets.values",
                                      f"must be a non-empty list of {prefix}-digit lowercase "
                                      "hex pk-hash prefixes")
        buckets = frozenset(values)
    out = SnapshotFilter(terms, key_range, prefix, buckets)
    if columns is not None:
        unknown = sorted(out.columns() - columns)
        if unknown:
            raise InvalidRequestError("filter", f"unknown column(s) {', '.join(unknown)}; the "
                                      "table has " + ", ".join(sorted(columns)))
    if key is not None and key_range is not None:
        for name, side in (("from", key_range.start), ("to", key_range.end)):
            if side is not None and sorted(side) != sorted(key):
                raise InvalidRequestError(f"filter.key_range.{name}",
                                          f"must name exactly the primary key {key}")
    return out
