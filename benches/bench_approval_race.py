"""The fan-in warm-up with the registry's approval in the middle (issue 25).

The fleet of ``bench_fanin`` (1,000 devices of one project with project coalescing, a
private Mosquitto, ``edgesync serve`` on a fresh database), except that nothing is
approved before the fleet starts: a seed device's first state and telemetry batches open
the registry reviews, then every device sends its first state batch and its first
telemetry batch (lineage creation), and the reviews are approved once half of those
batches are in the ledger. The batches before the approval are staged and replayed; the
replay races the live groups of the batches after it, on the same coalesced targets and
the same telemetry day partitions.

Printed: first batches/s, how many were staged and replayed, seconds from the approval
to the last row written. Asserted (smoke included): every batch in the ledger once,
every state key and telemetry row in the targets once, no staged row left, the worker's
``failed`` messages 0 and no ERROR in its log.

Measure::

    pytest benches/bench_approval_race.py --benchmark-only -s -p no:cacheprovider

Knobs: ``EDGESYNC_FANIN_DEVICES`` (1000), ``EDGESYNC_FANIN_PG`` (``shared`` or ``tuned``),
``EDGESYNC_FANIN_WARM_CAP`` (seconds of publishing, 900), as ``bench_fanin``.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from bench_fanin import ROWS, Fleet, verify
from bench_ingest import BASE_DB, _loop
from fanin_kit import (
    Batch,
    Broker,
    Device,
    Publishers,
    Tracked,
    TunedPostgres,
    Watcher,
    Worker,
    approve_registry,
    register_fleet,
    scratch_database,
    state_batch,
    telemetry_batch,
)

import edgesync.fleet
from edgesync.ingest import IngestPipeline, OutcomeStatus
from edgesync.store import create_pool, migrate

# Seconds to wait, after the last batch is in the ledger, for the replay to finish.
REPLAY_LIMIT = 300.0


def first_batch(item: tuple[str, Device]) -> Batch:
    kind, device = item
    return state_batch(device, ROWS) if kind == "state" else telemetry_batch(device, ROWS)


def failed_messages(worker: Worker) -> float:
    """The worker's ``failed`` message ends (``handle`` raised), from its /metrics."""
    url = worker.api_url()
    assert url is not None, "no HTTP API address in the serve log"
    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("edgesync_ingest_messages_total{")
               and 'outcome="failed"' in line)


async def race(devices: int, warm_cap: float, postgres: str,
               log: Any) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="approval-race-") as tmp:
        work = Path(tmp)
        server = TunedPostgres(work) if postgres == "tuned" else None
        if server is not None:
            server.start()
        try:
            return await _in_database(work, server.url if server else BASE_DB, devices,
                                      warm_cap, log)
        finally:
            if server is not None:
                server.stop()


async def _in_database(work: Path, base: str, devices: int, warm_cap: float,
                       log: Any) -> dict[str, Any]:
    async with scratch_database(base, "edgesync_race") as url:
        return await _race(work, url, devices, warm_cap, log)


async def _race(work: Path, url: str, devices: int, warm_cap: float,
                log: Any) -> dict[str, Any]:
    broker = Broker(work)
    pool = await create_pool(url, max_size=4)
    worker: Worker | None = None
    out: dict[str, Any] = {"devices": devices}
    try:
        await broker.start()
        async with pool.acquire() as conn:
            await migrate(conn)
            project_id = await edgesync.fleet.ensure_project(conn, "race", "race")
            await conn.execute("UPDATE edge_projects SET policy = policy || $2 WHERE id = $1",
                               project_id, {"schema_coalescing_mode": "project"})
            fleet_devices = await register_fleet(conn, project_id, "race", devices, "dev-")
            (seed,) = await register_fleet(conn, project_id, "race", 1, "seed-")
        pipe = IngestPipeline(pool)  # the seed's batches open the registry reviews
        for b in (state_batch(seed, ROWS), telemetry_batch(seed, ROWS)):
            outcome = await pipe.handle(b.topic, b.payload)
            assert outcome.status is OutcomeStatus.STAGED, outcome
        worker = Worker(work, url, broker.url)
        await worker.start()
        watch_conn = await asyncpg.connect(url, server_settings={"enable_seqscan": "off"})
        items = [(kind, d) for d in fleet_devices for kind in ("state", "telemetry")]
        tracked = Tracked()
        async with Watcher(watch_conn).running() as watcher, \
                Publishers("127.0.0.1", broker.port, 4) as pubs:
            fleet = Fleet(pubs, watcher)

            async def approve_midway() -> float:
                # Polled: ``tracked.changed`` is the saturating loop's, which clears it.
                while len(tracked.seen) < len(items) // 2:  # noqa: ASYNC110
                    await asyncio.sleep(0.01)
                await approve_registry(pool, project_id)
                return time.monotonic()

            approving = asyncio.create_task(approve_midway())
            started = time.monotonic()
            await fleet.saturate(first_batch, items, warm_cap, tracked=tracked)
            approved_at = await approving
            log(f"{len(tracked.seen)} first batches in the ledger in "
                f"{time.monotonic() - started:.1f}s; approved after {len(items) // 2}")
            targets = {r["source_table"]: r["target_table"] for r in await pool.fetch(
                "SELECT source_table, target_table FROM edge_table_lineages "
                "WHERE device_id = $1", seed.id)}
            ids = [d.id for d in fleet_devices]
            deadline = time.monotonic() + REPLAY_LIMIT
            while await pool.fetchval("SELECT count(*) FROM edge_staged_rows "
                                      "WHERE device_id = ANY($1)", ids):
                assert time.monotonic() < deadline, "the replay did not finish"
                await asyncio.sleep(0.1)
            out["approval_to_written_s"] = time.monotonic() - approved_at
            out["checks"] = await verify(pool, fleet, targets)
        await watch_conn.close()
        rate, count, _ = tracked.rate()
        outcomes = list(tracked.outcomes.values())
        out |= {"first_batches": count, "first_batches_per_s": rate,
                "staged_then_replayed": outcomes.count("staged"),
                "materialized_live": outcomes.count("materialized"),
                "failed_messages": failed_messages(worker),
                "errors_logged": [line for line in worker.log.read_text(
                    errors="replace").splitlines() if " ERROR " in line][:20]}
    finally:
        if worker is not None:
            worker.stop()
        broker.stop()
        await pool.close()
    return out




@pytest.mark.benchmark(group="fanin")
@pytest.mark.timeout(3600)
def test_fleet_warmup_with_the_approval_midway(benchmark: Any) -> None:
    smoke = bool(benchmark.disabled)
    devices = 10 if smoke else int(os.environ.get("EDGESYNC_FANIN_DEVICES", "1000"))
    warm_cap = float(os.environ.get("EDGESYNC_FANIN_WARM_CAP", "900"))
    postgres = "tuned" if smoke else os.environ.get("EDGESYNC_FANIN_PG", "shared")
    results: dict[str, Any] = {}

    def log(line: str) -> None:
        print(f"[approval-race {time.strftime('%H:%M:%S')}] {line}", flush=True)

    def once() -> None:
        with asyncio.Runner(loop_factory=_loop) as runner:
            results.update(runner.run(race(devices, warm_cap, postgres, log)))

    benchmark.pedantic(once, rounds=1, iterations=1)
    benchmark.extra_info.update(results)
    for k, v in results.items():
        print(f"  {k}: {v}")
    c = results["checks"]
    assert c["ledger_rows"] == c["ledger_distinct"] == c["batches_sent"] == 2 * devices, c
    assert results["staged_then_replayed"] + results["materialized_live"] == 2 * devices
    assert c["state_rows"] == c["state_rows_expected"], c
    assert c["telemetry_rows"] == c["telemetry_distinct_rows"] \
        == c["telemetry_rows_expected"], c
    assert results["failed_messages"] == 0, results
    assert results["errors_logged"] == [], results["errors_logged"]
