"""The kinds of downlink control (``control_kind`` on ``sync/ingest/control``): the cloud
sends them (``control``), the agent executes them (``agent.link._downlink``)."""

from __future__ import annotations

import enum

__all__ = ["ControlKind"]


class ControlKind(enum.StrEnum):
    PROGRESS = "progress"  # batches durably committed (docs/protocol.md, "Progress control")
    PAUSE_LINEAGE = "pause_lineage"
    RESUME_LINEAGE = "resume_lineage"
    STATE_WRITE = "state_write"  # cloud write-back of rows
    URL_GRANT = "url_grant"  # a presigned upload URL
    FORGET_LINEAGE = "forget_lineage"  # the cloud deleted the lineage: re-send the table
    SYNC_POLICY = "sync_policy"  # the device's attached sync policy (table_strategies)
    RESNAPSHOT = "resnapshot"  # send the table's current rows again (docs/recovery.md)
    VERIFY_TABLE = "verify_table"  # answer a digest of the table (docs/protocol.md)
