"""Property: any byte string on any device-to-cloud topic of a known device ends in the
ledger or in a logged drop, never in an escaped exception (issue 30, the Python boundary
of the fuzzed decoders).

Payloads are drawn by hypothesis (a fixed number of examples, derandomized, so CI runs
the same ones every time): arbitrary bytes, arbitrary JSON, a valid row or telemetry
batch with one envelope field or one row replaced by an arbitrary JSON value, and zstd
frames of all of those (compressed batches, docs/protocol.md).
"""

from __future__ import annotations

import json
import logging
from typing import Any

import asyncpg
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kits.telemetry_payloads import T0, Telemetry

from edgesync import _core, fleet
from edgesync.ingest import IngestPipeline, OutcomeStatus
from edgesync.protocol import DEVICE_TO_CLOUD, TopicKind, topic_for, uuid7

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner,
                                                                max_size=4),
    max_leaves=12)


def _valid_docs() -> list[dict[str, Any]]:
    """A valid row batch (as the agent sends one) and a valid telemetry batch."""
    columns = [("id", "INTEGER", 1, True), ("mode", "TEXT", 0, True),
               ("setpoint", "REAL", 0, False)]
    schema_hash, canonical = _core.schema_fingerprint("device_state", columns)
    rows = {"format_version": 1, "capture_strategy": "sqlite_row_batch_v1",
            "batch_id": uuid7(), "journal_epoch": uuid7(), "source_table": "device_state",
            "schema_hash": schema_hash, "schema_columns": orjson.loads(canonical),
            "first_commit_seq": 1, "last_commit_seq": 2,
            "rows": [{"commit_seq": 1, "op": "insert", "pk": {"id": 1},
                      "row": {"id": 1, "mode": "a", "setpoint": 1.5}},
                     {"commit_seq": 2, "op": "delete", "pk": {"id": 2}, "row": None}]}
    tele = orjson.loads(Telemetry().samples((T0, 20.5), (T0, None)))
    return [rows, tele]


@st.composite
def mutated_batches(draw: st.DrawFn) -> bytes:
    doc = dict(draw(st.sampled_from(_valid_docs())))
    key = draw(st.sampled_from([*doc, "rows[0]"]))
    value = draw(json_values)
    if key == "rows[0]":
        doc["rows"] = [value, *doc["rows"][1:]]
    else:
        doc[key] = value
    return _dumps(doc)


def _dumps(value: Any) -> bytes:
    # The standard library's encoder: it writes integers of any size (orjson refuses).
    return json.dumps(value).encode()


plain_payloads = (st.binary(max_size=600) | json_values.map(_dumps)
                  | mutated_batches())
payloads = plain_payloads | plain_payloads.map(lambda p: _core.compress_blob(p, 3))


@pytest.fixture
async def device(pool: asyncpg.Pool, unique: str) -> fleet.DeviceScope:
    async with pool.acquire() as conn:
        return await fleet.add_device(conn, project=f"hp-{unique}", name="gw",
                                      topic_slug=f"hp-{unique}")


@settings(max_examples=250, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(kind=st.sampled_from(sorted(DEVICE_TO_CLOUD)), payload=payloads)
async def test_any_payload_ends_in_the_ledger_or_a_logged_drop(
        pool: asyncpg.Pool, device: fleet.DeviceScope, caplog: pytest.LogCaptureFixture,
        kind: TopicKind, payload: bytes) -> None:
    caplog.set_level(logging.INFO, logger="edgesync")
    pipe = IngestPipeline(pool)
    before = await pool.fetchval(
        "SELECT count(*) FROM edge_export_segments WHERE device_id = $1", device.device_id)
    logged = len(caplog.records)
    out = await pipe.handle(topic_for(device.root_topic, kind), payload)  # never raises
    after = await pool.fetchval(
        "SELECT count(*) FROM edge_export_segments WHERE device_id = $1", device.device_id)
    if out.status in (OutcomeStatus.REJECTED, OutcomeStatus.IGNORED):
        dropped = [r for r in caplog.records[logged:] if r.levelno >= logging.INFO]
        assert after == before + 1 or dropped, (kind, out, payload[:80])
    else:
        # Taken: a batch (staged, written or a duplicate) or a report/ack acted on.
        assert out.status in (OutcomeStatus.STAGED, OutcomeStatus.MATERIALIZED,
                              OutcomeStatus.DUPLICATE), out
