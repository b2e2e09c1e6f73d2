"""The columns of live targets, kept between groups.

Every group of the live path needs, for each of its lineages, the mirrored and mapped
columns of its approved schema version and their types in the target table. Reading
them is one catalog join per group, but a fleet's groups name hundreds of lineages each,
and the answer almost never changes: a version's bindings are written once, when it is
approved, and never updated; edgesync only ever adds columns to a target. So the columns
are kept here by (lineage, schema hash, target table); what the lineage row says
(``sync_authority``) is read fresh every time.

What could still change behind our back is the type of a target column, altered by an
operator: a stale type shows as a write error, and the group writer calls
``forget_targets`` and tries the group once more, with the catalog read again, before
it takes the error to be the data's. A target with a column that did
not exist yet when read is not kept.

Equal answers are kept once: the devices of a coalesced project share a target and a
schema, so a fleet's thousands of lineages hold a handful of distinct column sets (a
soak's worker held 31,000 equal column objects, 8 MB at 1,000 devices, before).
"""

from __future__ import annotations

import collections
import uuid

from edgesync.materialize import MappedColumn, MirrorColumn

__all__ = ["TargetColumns", "forget_targets", "target_cache"]

TargetKey = tuple[uuid.UUID, str, str]
TargetColumns = tuple[tuple[MirrorColumn, ...], tuple[MappedColumn, ...]]


class _TargetCache:
    def __init__(self, limit: int = 50_000) -> None:
        self._limit = limit
        self._columns: collections.OrderedDict[TargetKey, TargetColumns] = (
            collections.OrderedDict())
        # Each distinct answer once, with how many keys hold it.
        self._shared: dict[TargetColumns, tuple[TargetColumns, int]] = {}
        # Answers given from the cache since the last ``forget``.
        self._hits = 0

    def get(self, key: TargetKey) -> TargetColumns | None:
        found = self._columns.get(key)
        if found is not None:
            self._columns.move_to_end(key)
            self._hits += 1
        return found

    def put(self, key: TargetKey, columns: TargetColumns) -> TargetColumns:
        """Keep ``columns`` for ``key``; returns the kept equal answer (share it)."""
        if any(c.stored_type is None for c in columns[0]):
            return columns
        self._release(key)
        shared, holders = self._shared.get(columns, (columns, 0))
        self._shared[shared] = (shared, holders + 1)
        self._columns[key] = shared
        while len(self._columns) > self._limit:
            self._release(next(iter(self._columns)))
        return shared

    def _release(self, key: TargetKey) -> None:
        held = self._columns.pop(key, None)
        if held is None:
            return
        shared, holders = self._shared[held]
        if holders == 1:
            del self._shared[held]
        else:
            self._shared[held] = (shared, holders - 1)

    def forget(self) -> bool:
        """Read every target from the catalog again (after a write error); returns
        whether any answer came from the cache since the last time."""
        hits, self._hits = self._hits, 0
        self._columns.clear()
        self._shared.clear()
        return hits > 0

    def __len__(self) -> int:
        return len(self._columns)

    @property
    def distinct(self) -> int:
        """How many distinct answers the kept ones are."""
        return len(self._shared)


target_cache = _TargetCache()


def forget_targets() -> bool:
    """Read every live target's columns from the catalog again: call it when a write
    failed (a column type may have been altered by hand). Returns whether any target
    was answered from the cache since the last call: if none, a retry would see the
    same columns."""
    return target_cache.forget()
