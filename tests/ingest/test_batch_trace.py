"""``serve --trace-batches``: each batch's timings inside the worker, in the order a
batch passes them, written once it is acknowledged; other messages write nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
from ingest.ingest_kit import fleet, topic

from edgesync.ingest import BatchTrace, IngestPipeline, OutcomeStatus

STEPS = ["received", "submitted", "grouped", "written", "committed", "acked"]


def upsert(f: Any, step: int) -> bytes:
    return f.payload(f.rows(("insert" if step == 0 else "update",
                             {"id": 1, "mode": f"m{step}", "setpoint": float(step)})),
                     with_schema=step == 0)


async def test_each_batch_has_its_steps_in_order(pool, batches, unique, tmp_path: Path):
    scopes, factories, _ = await fleet(pool, batches, unique, 6)
    pipe = IngestPipeline(pool)
    trace = BatchTrace(tmp_path / "trace.jsonl")

    async def consumed(topic_name: str, payload: bytes) -> None:
        # What the consumers do for each message, in a task of its own.
        stamps = trace.begin()
        outcome = await pipe.handle(topic_name, payload)
        assert outcome.status is OutcomeStatus.MATERIALIZED, outcome
        trace.end(stamps)

    payloads = [(topic(s), upsert(f, 1)) for s, f in zip(scopes, factories, strict=True)]
    await asyncio.gather(*[asyncio.create_task(consumed(t, p)) for t, p in payloads])
    # A message that is no batch (a device's status report) leaves no line.
    stamps = trace.begin()
    trace.end(stamps)
    trace.close()

    lines = [orjson.loads(line) for line in (tmp_path / "trace.jsonl").read_bytes().splitlines()]
    assert sorted(line["batch_id"] for line in lines) == sorted(
        orjson.loads(p)["batch_id"] for _, p in payloads)
    for line in lines:
        times = [line[step] for step in STEPS]
        assert all(t > 0 for t in times), line
        assert times == sorted(times), line
        assert 1 <= line["group"] <= len(payloads)
    # The six batches met in groups: fewer groups than batches.
    assert sum(1 / line["group"] for line in lines) < len(lines)

