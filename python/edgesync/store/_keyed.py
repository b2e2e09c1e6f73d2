"""Statements that look a group's keys up in a fleet-sized table.

A group writes for up to 128 lineages, and its statements join the group's keys
(``unnest`` of array parameters) with ``edge_table_lineages``, ``edge_devices`` and the
like. Knowing the array's length, PostgreSQL's cost model (a random page read costs four
sequential ones) finds that past ~100 keys a scan of the whole table is cheaper than as
many index probes, on a table of 20,000 lineages with or without statistics. The
scan's cost then grows with the fleet, once per group, and the table is in memory, so
the probes were cheaper all along (EXPLAIN ANALYZE, 128 keys of 20,000 lineages: lock
0.9 against 3.5 ms).

``any_of(n)`` is ``= ANY($n)`` over the array parameter ``$n`` again, in a form whose
length the planner cannot see (an ``ARRAY(SELECT …)`` it estimates at ten elements):
written ``t.id = {any_of(2)}`` next to the join, it makes the index the cheaper way in,
for any number of keys. ``tests/ingest/test_fleet_plans.py`` checks that the group's
statements plan no scan of a fleet-sized table.
"""

from __future__ import annotations

__all__ = ["any_of"]


def any_of(param: int | str, pg_type: str = "uuid") -> str:
    """SQL ``ANY(…)`` of the array parameter ``$param`` of ``pg_type`` (or of an array
    literal, ``store.array_literal``), its length hidden from the planner."""
    array = param if isinstance(param, str) else f"${param}::{pg_type}[]"
    return f"ANY(ARRAY(SELECT unnest({array})))"
