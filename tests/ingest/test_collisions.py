"""A group whose transaction collides with another (an object created meanwhile, a
deadlock) is written again, not dropped; a batch that fails alone, the same way, every
time, ends in a ledger row: staged ``materialization_failed``, or — when even staging
fails — rejected ``ingest_failed``. Never an exception for the consumer to log and
acknowledge (issue 25)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import Any

import asyncpg
import orjson
import pytest
from ingest.ingest_kit import fleet, topic

from edgesync.ingest import IngestPipeline, OutcomeStatus, _accept, _write
from edgesync.materialize import quote_ident
from edgesync.protocol import RejectionCode


def upserts(f: Any, step: int) -> bytes:
    return f.payload(f.rows(*[("insert", {"id": k, "mode": f"m{step}", "setpoint": 1.0})
                              for k in range(1, 4)]), with_schema=step == 0)


def failing(monkeypatch: pytest.MonkeyPatch, where: Any, name: str,
            error: Callable[[list[Any]], BaseException | None]) -> list[int]:
    """``where.name`` raising ``error(args)`` when that returns one; counts the calls."""
    real = getattr(where, name)
    calls = [0]

    async def wrapper(conn: Any, items: Any, *args: Any, **kw: Any) -> Any:
        calls[0] += 1
        exc = error(items)
        if exc is not None:
            raise exc
        return await real(conn, items, *args, **kw)

    monkeypatch.setattr(where, name, wrapper)
    return calls


def duplicate_table() -> BaseException:
    return asyncpg.DuplicateTableError('relation "edge_ts_x_d20261205" already exists')


def colliding(times: int, error: Callable[[], BaseException] = duplicate_table
              ) -> Callable[[list[Any]], BaseException | None]:
    """``error()`` for the first ``times`` calls that write something."""
    left = [times]

    def collide(items: list[Any]) -> BaseException | None:
        if left[0] and items:
            left[0] -= 1
            return error()
        return None

    return collide


async def test_a_group_that_collides_is_written_again(pool, batches, unique, monkeypatch,
                                                      caplog):
    scopes, factories, table = await fleet(pool, batches, unique, 4)
    pipe = IngestPipeline(pool)
    calls = failing(monkeypatch, _write, "write_batches", colliding(2))
    with caplog.at_level(logging.WARNING, logger="edgesync"):
        outcomes = await asyncio.gather(*[pipe.handle(topic(s), upserts(f, 0))
                                          for s, f in zip(scopes, factories, strict=True)])
    assert {o.status for o in outcomes} == {OutcomeStatus.MATERIALIZED}
    assert calls[0] >= 3
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert await pool.fetchval(f"SELECT count(*) FROM {quote_ident(table)} "
                               "WHERE mode = 'm0'") == 12


async def test_a_catalog_unique_violation_is_a_collision_not_the_rows(pool, batches, unique,
                                                                     monkeypatch):
    """Two sessions creating one name without a lock between them fail in pg_type's
    index: retried, never taken for a row PostgreSQL refuses (quarantine)."""
    scopes, factories, _ = await fleet(pool, batches, unique, 1)
    pipe = IngestPipeline(pool)

    def catalog_violation() -> BaseException:
        exc = asyncpg.UniqueViolationError(
            'duplicate key value violates unique constraint "pg_type_typname_nsp_index"')
        exc.table_name = "pg_type"  # type: ignore[attr-defined]
        return exc

    failing(monkeypatch, _write, "write_batches", colliding(1, catalog_violation))
    outcome = await pipe.handle(topic(scopes[0]), upserts(factories[0], 0))
    assert outcome.status is OutcomeStatus.MATERIALIZED
    assert outcome.detail is None  # no row quarantined


async def test_a_batch_failing_alone_every_time_is_staged_with_a_ledger_row(
        pool, batches, unique, monkeypatch):
    scopes, factories, _ = await fleet(pool, batches, unique, 3)
    pipe = IngestPipeline(pool)
    poisoned = scopes[1].device_id

    def broken(items: list[Any]) -> BaseException | None:
        if any(i.device_id == poisoned for i in items):
            return RuntimeError("a bug in a rare path")
        return None

    failing(monkeypatch, _write, "write_batches", broken)
    outcomes = await asyncio.gather(*[pipe.handle(topic(s), upserts(f, 0))
                                      for s, f in zip(scopes, factories, strict=True)])
    by_device = {s.device_id: o for s, o in zip(scopes, outcomes, strict=True)}
    assert by_device[poisoned].status is OutcomeStatus.STAGED
    assert by_device[poisoned].code == "materialization_failed"
    assert {o.status for d, o in by_device.items() if d != poisoned} == {
        OutcomeStatus.MATERIALIZED}
    ledger = await pool.fetchrow(
        "SELECT outcome, count(*) AS n FROM edge_export_segments WHERE device_id = $1 "
        "GROUP BY outcome", poisoned)
    assert (ledger["outcome"], ledger["n"]) == ("staged", 1)
    assert await pool.fetchval(
        "SELECT staging_reason FROM edge_staged_rows WHERE device_id = $1",
        poisoned) == "materialization_failed"
    # Counted by the breaker, as any materialization failure.
    assert await pool.fetchval(
        "SELECT materialization_errors FROM edge_table_lineages WHERE device_id = $1",
        poisoned) >= 1


async def test_a_batch_that_cannot_even_be_staged_is_recorded_rejected(
        pool, batches, unique, monkeypatch):
    scopes, factories, _ = await fleet(pool, batches, unique, 1)
    pipe = IngestPipeline(pool)
    failing(monkeypatch, _write, "write_batches",
            lambda items: RuntimeError("write bug") if items else None)
    failing(monkeypatch, _accept, "stage_many", lambda items: RuntimeError("stage bug"))
    payload = upserts(factories[0], 0)
    batch_id = uuid.UUID(orjson.loads(payload)["batch_id"])
    outcome = await pipe.handle(topic(scopes[0]), payload)
    assert outcome.status is OutcomeStatus.REJECTED
    assert outcome.code == RejectionCode.INGEST_FAILED
    row = await pool.fetchrow(
        "SELECT outcome, rejection_code, rejection_detail FROM edge_export_segments "
        "WHERE device_id = $1 AND batch_id = $2", scopes[0].device_id, batch_id)
    assert (row["outcome"], row["rejection_code"]) == ("rejected", "ingest_failed")
    assert "stage bug" in row["rejection_detail"]


async def test_a_replay_chunk_that_collides_is_replayed_again(pool, batches, unique,
                                                               monkeypatch):
    """The replay of the batch staged before the registry's approval collides once (live
    ingest created the day's partition meanwhile): the chunk is replayed again in a new
    transaction, never marked ``materialization_failed``."""
    calls = failing(monkeypatch, _write, "write_batches", colliding(1))
    scopes, _, table = await fleet(pool, batches, unique, 1)  # (replays the seed batch)
    assert calls[0] == 2
    assert await pool.fetchval(f"SELECT mode FROM {quote_ident(table)} WHERE device_id = $1",
                               scopes[0].device_id) == "seed"
    assert await pool.fetchval("SELECT count(*) FROM edge_staged_rows WHERE device_id = $1",
                               scopes[0].device_id) == 0
