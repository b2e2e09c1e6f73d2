"""Outbox, progress confirmations, backpressure and the materialization breaker, against
a real PostgreSQL with a recording publisher in place of the broker."""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import asyncpg
import orjson
import pytest
from kits.review_helpers import approve

from edgesync import fleet
from edgesync.control import (
    BackpressureSweeper,
    ControlSender,
    ProgressReporter,
    reset_materialization,
)
from edgesync.errors import ControlRejected
from edgesync.ingest import IngestPipeline, OutcomeStatus, Replayer
from edgesync.materialize import quote_ident
from edgesync.protocol import verify_control
from edgesync.staging import requeue_failed


class Recorder:
    """Keeps what was published to one device (other tests' devices share the database)."""

    def __init__(self, scope: fleet.DeviceScope) -> None:
        self.root = scope.root_topic + "/"
        self.sent: list[tuple[str, dict[str, Any]]] = []

    async def publish(self, topic: str, payload: bytes) -> None:
        if topic.startswith(self.root):
            self.sent.append((topic, orjson.loads(payload)))

    async def publish_all(self, messages: Sequence[tuple[str, bytes]]) -> None:
        for topic, payload in messages:
            await self.publish(topic, payload)

    def kinds(self, kind: str) -> list[dict[str, Any]]:
        return [body for _, body in self.sent if body["control_kind"] == kind]


async def make_device(pool: asyncpg.Pool, unique: str, **policy: Any) -> fleet.DeviceScope:
    async with pool.acquire() as conn:
        scope = await fleet.add_device(conn, project=f"fc-{unique}", name=f"gw-{unique}",
                                       topic_slug=f"fc-{unique}")
        await conn.execute("UPDATE edge_projects SET policy = $2 WHERE id = $1",
                           scope.project_id, policy)
    return scope


def topic(scope: fleet.DeviceScope) -> str:
    return f"{scope.root_topic}/sync/rows/batch"


async def lineage(pool: asyncpg.Pool, lineage_id: Any) -> asyncpg.Record:
    row = await pool.fetchrow("SELECT * FROM edge_table_lineages WHERE id = $1", lineage_id)
    assert row is not None
    return row


async def test_backpressure_pauses_device_and_resumes_below_threshold(pool, batches, unique):
    scope = await make_device(pool, unique, max_pending_rows_per_lineage=10,
                              resume_threshold_percent=80)
    pipe, rec = IngestPipeline(pool), Recorder(scope)
    sender = ControlSender(pool, rec)
    f, other = batches(), batches(table="other_table")
    first = None
    for i in range(3):  # 12 rows staged under review: crosses the cap of 10
        rows = f.rows(*(("insert", {"id": i * 4 + k, "mode": "m", "setpoint": 1.0})
                        for k in range(4)))
        out = await pipe.handle(topic(scope), f.payload(rows))
        first = first or out
    assert first is not None
    state = await lineage(pool, first.lineage_id)
    assert (state["status"], state["pause_reason"], state["paused_by_control"]) == (
        "paused", "backpressure", True)
    # Another table of the same device keeps flowing (staged under its own review).
    out = await pipe.handle(topic(scope), other.payload(
        other.rows(("insert", {"id": 1, "mode": "x", "setpoint": 2.0}))))
    assert (await lineage(pool, out.lineage_id))["paused_by_control"] is False

    await sender.send_due()
    (pause,) = rec.kinds("pause_lineage")
    assert pause["source_table"] == "device_state" and pause["server_watermark"] == 12
    assert rec.sent[0][0] == f"{scope.root_topic}/sync/ingest/control"
    await sender.send_due()  # not due again until the resend timeout
    assert len(rec.kinds("pause_lineage")) == 1

    # Device ACKs; approval drains the backlog through replay; the sweep resumes.
    ack = orjson.dumps({"format_version": 1, "control_id": pause["control_id"]})
    await pipe.handle(f"{scope.root_topic}/sync/ingest/ack", ack)
    assert await pool.fetchval("SELECT status FROM edge_pending_controls WHERE id = $1",
                               uuid.UUID(pause["control_id"])) == "acked"
    acked_at = await pool.fetchval("SELECT acked_at FROM edge_pending_controls WHERE id = $1",
                                   uuid.UUID(pause["control_id"]))
    await pipe.handle(f"{scope.root_topic}/sync/ingest/ack", ack)  # a duplicate ACK: no-op
    assert await pool.fetchval("SELECT acked_at FROM edge_pending_controls WHERE id = $1",
                               uuid.UUID(pause["control_id"])) == acked_at
    await approve(pool, first.lineage_id)
    state = await lineage(pool, first.lineage_id)
    assert state["pause_reason"] == "backpressure"  # approval alone does not resume the device
    await Replayer(pool).drain_pending()
    assert await BackpressureSweeper(pool).sweep() >= 1
    state = await lineage(pool, first.lineage_id)
    assert (state["status"], state["staged_rows"]) == ("active", 0)
    await sender.send_due()
    (resume,) = rec.kinds("resume_lineage")
    assert resume["server_watermark"] == 12


async def test_unacked_controls_are_resent_after_the_timeout(pool, batches, unique):
    scope = await make_device(pool, unique, max_pending_rows_per_lineage=1)
    pipe, rec = IngestPipeline(pool), Recorder(scope)
    f = batches()
    await pipe.handle(topic(scope), f.payload(f.rows(
        ("insert", {"id": 1, "mode": "m", "setpoint": 1.0}),
        ("insert", {"id": 2, "mode": "m", "setpoint": 1.0}))))
    sender = ControlSender(pool, rec, resend_after=timedelta(0))
    await sender.send_due()
    await sender.send_due()
    assert len(rec.kinds("pause_lineage")) == 2
    first, second = rec.kinds("pause_lineage")
    assert first["control_id"] == second["control_id"]


async def test_breaker_opens_after_five_permanent_errors_and_reset_resumes(pool, batches,
                                                                          unique):
    scope = await make_device(pool, unique)
    pipe, rec = IngestPipeline(pool), Recorder(scope)
    f = batches()
    first = await pipe.handle(topic(scope), f.payload(
        f.rows(("insert", {"id": 1, "mode": "ok", "setpoint": 1.0}))))
    await approve(pool, first.lineage_id)
    await Replayer(pool).drain_pending()
    # A row's bad data is quarantined, never counted by the breaker.
    for i in range(6):
        out = await pipe.handle(topic(scope), f.payload(
            f.rows(("insert", {"id": 10 + i, "mode": "bad", "setpoint": "NaN?"}))))
        assert (out.status, out.detail) == (OutcomeStatus.MATERIALIZED, "1 row(s) quarantined")
    state = await lineage(pool, first.lineage_id)
    assert (state["status"], state["materialization_errors"]) == ("active", 0)
    # The target drifting from its bindings (a column renamed by hand) is the lineage's.
    target = quote_ident(state["target_table"])
    await pool.execute(f"ALTER TABLE {target} RENAME COLUMN setpoint TO gone")
    for i in range(5):
        out = await pipe.handle(topic(scope), f.payload(
            f.rows(("insert", {"id": 20 + i, "mode": "m", "setpoint": 2.0}))))
        assert out.code == "materialization_failed"
    state = await lineage(pool, first.lineage_id)
    assert (state["status"], state["pause_reason"]) == ("paused", "circuit_breaker")
    assert "setpoint" in state["last_error"]
    await pool.execute(f"ALTER TABLE {target} RENAME COLUMN gone TO setpoint")
    await ControlSender(pool, rec).send_due()
    assert len(rec.kinds("pause_lineage")) == 1
    # While the breaker is open, good batches are staged, not written.
    out = await pipe.handle(topic(scope), f.payload(
        f.rows(("insert", {"id": 99, "mode": "good", "setpoint": 3.0}))))
    assert (out.status, out.code) == (OutcomeStatus.STAGED, "lineage_paused")
    async with pool.acquire() as conn, conn.transaction():
        reset = await reset_materialization(conn, first.lineage_id)
        requeued = await requeue_failed(conn, first.lineage_id)
    # The six quarantined rows stay quarantined; the five failed batches replay.
    assert (reset.quarantined_rows, requeued) == (6, 5)
    state = await lineage(pool, first.lineage_id)
    assert (state["status"], state["materialization_errors"]) == ("active", 0)
    await ControlSender(pool, rec).send_due()
    assert len(rec.kinds("resume_lineage")) == 1


async def test_progress_confirms_committed_and_redelivered_batches(pool, batches, unique):
    scope = await make_device(pool, unique)
    pipe, rec = IngestPipeline(pool), Recorder(scope)
    reporter = ProgressReporter(pool, rec)
    await reporter.report()  # start from "now"
    rec.sent.clear()
    f = batches()
    p1 = f.payload(f.rows(("insert", {"id": 1, "mode": "m", "setpoint": 1.0})))
    p2 = f.payload(f.rows(("insert", {"id": 2, "mode": "m", "setpoint": 1.0}),
                          ("insert", {"id": 3, "mode": "m", "setpoint": 1.0})))
    await pipe.handle(topic(scope), p1)
    await pipe.handle(topic(scope), p2)
    await pipe.handle(topic(scope), b"{broken")  # rejected: never confirmed
    await reporter.report()
    (progress,) = rec.kinds("progress")
    assert progress["journal_epoch"] == f.epoch and progress["source_table"] == "device_state"
    assert [(c["first_commit_seq"], c["last_commit_seq"]) for c in progress["committed"]] == [
        (1, 1), (2, 3)]
    rec.sent.clear()
    await reporter.report()
    assert rec.sent == []
    # The device did not hear it and sends batch 2 again: confirmed again.
    assert (await pipe.handle(topic(scope), p2)).status is OutcomeStatus.DUPLICATE
    await reporter.report()
    (again,) = rec.kinds("progress")
    assert [c["batch_id"] for c in again["committed"]] == [orjson.loads(p2)["batch_id"]]


class Timed(Recorder):
    """A recorder of one project's devices that also notes when each publish call came."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.sent = []
        self.calls: list[tuple[float, int]] = []

    async def publish_all(self, messages: Sequence[tuple[str, bytes]]) -> None:
        self.calls.append((time.monotonic(), len(messages)))
        await super().publish_all(messages)


async def test_a_fleets_round_of_confirmations_is_spread_over_the_interval(
        pool, batches, unique):
    """150 devices: 3 chunks of at most 64 controls, each one signed and published on its
    own, at least an equal share of half the interval apart; every device confirmed."""
    interval, devices = 0.3, 150
    scopes = []
    async with pool.acquire() as conn:
        for i in range(devices):
            scopes.append(await fleet.add_device(conn, project=f"fr-{unique}",
                                                 name=f"gw-{i}", topic_slug=f"fr-{unique}"))
    rec = Timed(f"fr-{unique}/")
    reporter = ProgressReporter(pool, rec, interval=interval)
    await reporter.report()  # start from "now"
    rec.sent.clear()
    rec.calls.clear()
    pipe = IngestPipeline(pool)
    for scope in scopes:
        f = batches()
        out = await pipe.handle(topic(scope), f.payload(
            f.rows(("insert", {"id": 1, "mode": "m", "setpoint": 1.0}))))
        assert out.status in (OutcomeStatus.MATERIALIZED, OutcomeStatus.STAGED), out
    assert await reporter.report() == devices
    assert sorted(t for t, _ in rec.sent) == sorted(
        f"{s.root_topic}/sync/ingest/control" for s in scopes)
    assert [n for _, n in rec.calls] == [64, 64, 22]
    gap = interval * 0.5 / 3
    starts = [t for t, _ in rec.calls]
    assert all(b - a >= gap * 0.9 for a, b in itertools.pairwise(starts)), starts


async def test_signed_devices_get_signed_controls(pool, batches, unique):
    scope = await make_device(pool, unique, max_pending_rows_per_lineage=0)
    async with pool.acquire() as conn:
        await conn.execute("UPDATE edge_devices SET signed_control = true, control_token = $2 "
                           "WHERE id = $1", scope.device_id, "s3cret")
    pipe, rec = IngestPipeline(pool), Recorder(scope)
    f = batches()
    await pipe.handle(topic(scope), f.payload(
        f.rows(("insert", {"id": 1, "mode": "m", "setpoint": 1.0}))))
    await ControlSender(pool, rec, resend_after=timedelta(0)).send_due()
    await ControlSender(pool, rec, resend_after=timedelta(0)).send_due()
    first, second = rec.kinds("pause_lineage")
    assert verify_control(first, b"s3cret", last_seq=0) == 1
    assert verify_control(second, b"s3cret", last_seq=1) == 2
    with pytest.raises(ControlRejected) as forged:
        verify_control({**second, "server_watermark": 10**9}, b"s3cret", last_seq=1)
    assert forged.value.reason == "bad_signature"
    with pytest.raises(ControlRejected) as replayed:
        verify_control(first, b"s3cret", last_seq=2)
    assert replayed.value.reason == "replayed"
