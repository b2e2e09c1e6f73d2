"""The agent's status report (edgesync extension, docs/protocol.md "Device status").

A ``request_kind: "status"`` message on ``sync/ingest/request``, sent by the agent when
it starts, every ``report_interval_s`` while it runs, when it stops (``stopped``) and,
as its MQTT will, by the broker when the agent vanished (``offline``)::

    {"format_version": 1, "request_kind": "status", "state": "running",
     "agent_version": "0.1.0", "report_interval_s": 30, "journal_depth": 12,
     "oldest_unconfirmed_age_s": 1.5, "buffer_bytes": 4096, "paused_tables": ["t"],
     "unconfirmed_batches": 1, "bytes_sent": 52311, "budget_left_bytes": null,
     "backlog_by_table": {"readings": 1200}}

Every field but ``format_version``, ``request_kind`` and ``state`` may be absent (a will
carries no figures). ``parse_status`` is the one reading of it, for the cloud.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

__all__ = ["STATUS_REQUEST_KIND", "AgentState", "StatusReport", "parse_status"]

STATUS_REQUEST_KIND = "status"


class AgentState(enum.StrEnum):
    """What the agent says about itself."""

    RUNNING = "running"
    STOPPED = "stopped"  # a clean stop: its last report
    OFFLINE = "offline"  # its MQTT will: the broker lost it


@dataclass(frozen=True, slots=True)
class StatusReport:
    state: AgentState
    doc: dict[str, Any]  # the figures as the API shows them (only known fields)


_COUNTS = ("journal_depth", "buffer_bytes", "unconfirmed_batches", "bytes_sent",
           "budget_left_bytes")
_MOST_TABLES = 10_000
_SECONDS = ("oldest_unconfirmed_age_s", "report_interval_s")
_LONGEST_TEXT = 100


def _table_name(t: object) -> bool:
    return isinstance(t, str) and 0 < len(t.encode()) <= 255 and "\0" not in t


def _count(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1 << 63


def _seconds(v: object) -> bool:
    return (isinstance(v, int | float) and not isinstance(v, bool)
            and 0 <= v < 10 ** 10)


def parse_status(doc: dict[str, Any]) -> StatusReport | str:
    """The report, or what is wrong with it (naming the field)."""
    try:
        state = AgentState(str(doc.get("state")))
    except ValueError:
        return f"state must be one of {', '.join(s.value for s in AgentState)}"
    out: dict[str, Any] = {}
    for name in _COUNTS:
        if doc.get(name) is not None:
            if not _count(doc[name]):
                return f"{name} must be an integer >= 0"
            out[name] = doc[name]
    for name in _SECONDS:
        if doc.get(name) is not None:
            if not _seconds(doc[name]):
                return f"{name} must be a number of seconds >= 0"
            out[name] = float(doc[name])
    version = doc.get("agent_version")
    if version is not None:
        if not isinstance(version, str) or len(version) > _LONGEST_TEXT or "\0" in version:
            return f"agent_version must be a string of at most {_LONGEST_TEXT} characters"
        out["agent_version"] = version
    paused = doc.get("paused_tables")
    if paused is not None:
        if not isinstance(paused, list) or len(paused) > _MOST_TABLES or not all(
                _table_name(t) for t in paused):
            return "paused_tables must be a list of table names"
        out["paused_tables"] = paused
    backlog = doc.get("backlog_by_table")
    if backlog is not None:
        if not isinstance(backlog, dict) or len(backlog) > _MOST_TABLES or not all(
                _table_name(t) and _count(n) for t, n in backlog.items()):
            return "backlog_by_table must map table names to row counts >= 0"
        out["backlog_by_table"] = backlog
    return StatusReport(state, out)
