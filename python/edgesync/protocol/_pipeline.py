"""The two pipelines a source table's changes travel by (docs/protocol.md): ``rows``
(state: every change of a table with a primary key, ``sync/rows/batch``) and
``telemetry`` (append-only readings with a timestamp, ``sync/telemetry/batch``).

A wire word: the agent's status report names it per table, and the cloud keeps it on
each lineage (``edge_table_lineages.pipeline``), staged batch and quarantined row."""

from __future__ import annotations

import enum

__all__ = ["Pipeline"]


class Pipeline(enum.StrEnum):
    ROWS = "rows"
    TELEMETRY = "telemetry"
