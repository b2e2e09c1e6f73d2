"""Schema observations and capture-gap reports from devices."""

from __future__ import annotations

import orjson

from edgesync import fleet
from edgesync.ingest import IngestPipeline, OutcomeStatus


async def test_observation_and_gap_report_are_recorded(pool, unique):
    async with pool.acquire() as conn:
        scope = await fleet.add_device(conn, project=f"r-{unique}", name=f"gw-{unique}",
                                       topic_slug=f"r-{unique}")
    pipe = IngestPipeline(pool)
    root = scope.root_topic
    obs = {"format_version": 1, "source_table": "t", "schema_hash": "a" * 64,
           "observed_at": "2026-04-28T09:00:00.000000000Z"}
    out = await pipe.handle(f"{root}/sync/schema/observe", orjson.dumps(obs))
    assert out.status is OutcomeStatus.MATERIALIZED
    assert await pool.fetchval("SELECT count(*) FROM edge_schema_observations "
                               "WHERE device_id = $1", scope.device_id) == 1
    bad = await pipe.handle(f"{root}/sync/schema/observe",
                            orjson.dumps({**obs, "schema_hash": "XYZ"}))
    assert (bad.status, bad.code) == (OutcomeStatus.REJECTED, "invalid_schema_hash")

    gap = {"format_version": 1, "request_kind": "gap_report", "source_table": "t",
           "journal_epoch": "0193a5c0-0000-7000-8000-000000000000",
           "first_commit_seq": 10, "last_commit_seq": 99}
    out = await pipe.handle(f"{root}/sync/ingest/request", orjson.dumps(gap))
    assert out.status is OutcomeStatus.MATERIALIZED
    row = await pool.fetchrow("SELECT first_commit_seq, last_commit_seq FROM edge_capture_gaps "
                              "WHERE device_id = $1", scope.device_id)
    assert tuple(row) == (10, 99)
    event = await pool.fetchval("SELECT count(*) FROM edge_events WHERE project_id = $1 AND "
                                "event_type = 'edgesync.capture_gap.reported.v1'",
                                scope.project_id)
    assert event == 1
    bad = await pipe.handle(f"{root}/sync/ingest/request",
                            orjson.dumps({**gap, "first_commit_seq": "ten"}))
    assert (bad.status, bad.code) == (OutcomeStatus.REJECTED, "invalid_gap_report")
