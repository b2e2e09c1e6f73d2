"""``sync/telemetry/batch`` payloads built the way the agent builds them, for the tests
that feed the ingest pipeline directly (in tests/, tests/api and tests/governance: pytest
puts tests/ on ``sys.path`` for tests/conftest.py, so they import it by plain name)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import orjson

from edgesync import _core
from edgesync.protocol import uuid7

T0 = datetime(2026, 4, 28, 9, 0, tzinfo=UTC)
COLUMNS = [("ts", "TEXT", 0, True), ("value_c", "REAL", 0, False),
           ("sensor", "TEXT", 0, False)]


def rfc3339(t: datetime) -> str:
    return t.astimezone(UTC).isoformat().replace("+00:00", "Z")


class Telemetry:
    """One device's telemetry table: samples ``(ts, value_c)`` of a sensor, numbered
    ``batch_seq`` 1, 2, ... as the agent sends them."""

    def __init__(self, table: str = "temps") -> None:
        self.table = table
        self.seq = 0
        self.schema_hash, canonical = _core.schema_fingerprint(table, COLUMNS)
        self.schema_columns = orjson.loads(canonical)

    def rows(self, *samples: tuple[datetime, float | None], sensor: str = "s1"
             ) -> list[dict[str, Any]]:
        return [{"ts": rfc3339(t), "row_id": str(uuid.uuid4()),
                 "fields": {"value_c": v, "sensor": sensor}} for t, v in samples]

    def payload(self, rows: list[dict[str, Any]], *, seq: int | None = None,
                **override: Any) -> bytes:
        """A batch of ``rows``, the next ``batch_seq`` unless ``seq`` is given;
        ``override`` replaces fields of the envelope (to build invalid ones)."""
        if seq is None:
            self.seq += 1
            seq = self.seq
        stamps = [datetime.fromisoformat(r["ts"]) for r in rows] or [T0]
        doc: dict[str, Any] = {
            "format_version": 1, "capture_strategy": "sqlite_telemetry_batch_v1",
            "batch_id": uuid7(), "batch_seq": seq, "source_table": self.table,
            "schema_hash": self.schema_hash, "schema_columns": self.schema_columns,
            "cursor_start_ts": rfc3339(min(stamps)), "cursor_end_ts": rfc3339(max(stamps)),
            "row_count": len(rows), "rows": rows,
        }
        doc.update(override)
        return orjson.dumps(doc)

    def samples(self, *samples: tuple[datetime, float | None], sensor: str = "s1") -> bytes:
        """The next batch, of these samples."""
        return self.payload(self.rows(*samples, sensor=sensor))
