"""PostgreSQL fails over under load: a primary and its streaming standby of the test's
own (kits.pg_pair), two ``edgesync serve`` processes reaching them through one
multi-host URL (``target_session_attrs=read-write``), real agents (``edgesync agent``
processes) writing continuously through a private Mosquitto. The primary crashes
(``pg_ctl stop -m immediate``) and the standby is promoted.

- ``sync``: the primary commits only what the standby flushed
  (``synchronous_standby_names``). Every worker finds the new primary by itself,
  ``/readyz`` says 503 while the database is gone, and afterwards the cloud equals SQLite
  (nothing confirmed lost, nothing doubled) and every journal drains.
- ``async+confirm-after-replica``: commits return before the standby has them; the
  standby is made to lag 2 s before the crash (``PgPair.fail_over(lag=…)``), so the newest
  commits surely die with the primary (the test counts them). ``--confirm-after-replica``
  confirms to devices only what the standby replayed, so those rows stay in the journals
  and are sent again. The promoted primary has no standby: confirmations wait (by design,
  docs/production.md) until the test attaches a new one; then the journals drain and the
  cloud equals SQLite.
- ``async-unprotected``: the same without the option, the hazard it closes: the journals
  drain, and rows are missing from the cloud for good.

Each run prints its figures (outage seen by the workers, time to drain); the last ones
are in docs/production.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sqlite3
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import httpx
import pytest
from kits.e2e_kit import (
    Device,
    app,
    approve,
    eventually,
    register,
    sqlite_table,
    state_rows,
    target_of,
    wait_equal,
)
from kits.fault_kit import Broker, free_port, tail
from kits.pg_pair import PgPair
from kits.write_load import write_load

from edgesync.store import create_pool

pytestmark = [pytest.mark.e2e, pytest.mark.once, pytest.mark.timeout(180)]

EDGESYNC = str(Path(sys.executable).with_name("edgesync"))
COLS = ["id", "n", "s", "x"]
DEVICES = 2


class Process:
    """An ``edgesync`` process with its output in a log file."""

    def __init__(self, log: Path, *argv: str) -> None:
        self.log, self.argv = log, argv
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = await asyncio.create_subprocess_exec(
                EDGESYNC, "--log-level", "info", *self.argv, stdout=out, stderr=out)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    async def stop(self) -> None:
        if self.proc is None or self.proc.returncode is not None:
            return
        self.proc.terminate()
        try:
            await asyncio.wait_for(self.proc.wait(), 30)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()


class Readiness:
    """Polls a worker's ``/readyz`` every 100 ms: when it first failed after the crash
    and when it answered 200 again."""

    def __init__(self, name: str, port: int) -> None:
        self.name, self.url = name, f"http://127.0.0.1:{port}/readyz"
        self.down_at: float | None = None
        self.up_at: float | None = None
        self.reason = ""

    async def ready(self, client: httpx.AsyncClient) -> bool:
        with contextlib.suppress(httpx.HTTPError):
            response = await client.get(self.url, timeout=2)
            if response.status_code != 200:
                self.reason = response.text[:300]
            return response.status_code == 200
        return False

    async def watch(self, client: httpx.AsyncClient) -> None:
        while self.up_at is None:
            ok = await self.ready(client)
            now = time.monotonic()
            if not ok and self.down_at is None:
                self.down_at = now
            elif ok and self.down_at is not None:
                self.up_at = now
            await asyncio.sleep(0.1)


def journal_count(db: Path) -> int:
    with contextlib.closing(sqlite3.connect(db, timeout=10)) as conn:
        return int(conn.execute("SELECT count(*) FROM __edgesync_journal").fetchone()[0])


async def journals_drained(devices: list[Device]) -> bool:
    """Every journaled change confirmed (the journal's top row always stays)."""
    return all(journal_count(d.db) <= 1 for d in devices)


@contextlib.asynccontextmanager
async def pair_and_broker(synchronous: bool) -> AsyncIterator[tuple[PgPair, Broker]]:
    root = Path(tempfile.mkdtemp(prefix="edgesync-failover-"))
    os.chmod(root, 0o755)
    pair, broker = PgPair(root, synchronous=synchronous), Broker(root)
    try:
        await pair.start()
        await broker.start()
        yield pair, broker
    except BaseException:
        print(tail(root / "pg_ctl.log"), tail(root / "primary.log"), tail(root / "standby.log"))
        raise
    finally:
        await broker.stop()
        await pair.stop()
        shutil.rmtree(root, ignore_errors=True)


class Mode:
    """How the pair replicates, whether the workers wait for the standby before they
    confirm, and how long the standby lags (receives nothing) before the crash."""

    def __init__(self, name: str, *, synchronous: bool, confirm_after_replica: bool,
                 lag: float) -> None:
        self.name, self.synchronous, self.lag = name, synchronous, lag
        self.confirm_after_replica = confirm_after_replica

    @property
    def safe(self) -> bool:
        return self.synchronous or self.confirm_after_replica


MODES = [Mode("sync", synchronous=True, confirm_after_replica=False, lag=0),
         Mode("async+confirm-after-replica", synchronous=False, confirm_after_replica=True,
              lag=2),
         Mode("async-unprotected", synchronous=False, confirm_after_replica=False, lag=2)]


@pytest.mark.parametrize("mode", [pytest.param(m, id=m.name) for m in MODES])
async def test_failover(tmp_path: Path, unique: str, mode: Mode) -> None:
    """``sync`` and ``async+confirm-after-replica``: nothing lost, nothing doubled.
    ``async-unprotected`` is the hazard the option closes: the batches confirmed from
    commits that died with the primary are missing from the cloud for good."""
    async with pair_and_broker(mode.synchronous) as (pair, broker):
        ports = [free_port() for _ in range(2)]
        workers = [Process(tmp_path / f"w{n}.log", "serve", "--database-url", pair.url,
                           "--mqtt-url", broker.url, "--client-id", f"w{n}-{unique}",
                           "--shared-group", f"failover-{unique}", "--api-port", str(port),
                           "--data-dir", str(tmp_path / f"w{n}"),
                           *(["--confirm-after-replica"] if mode.confirm_after_replica
                             else []))
                   for n, port in enumerate(ports)]
        watchers = [Readiness(f"w{n}", port) for n, port in enumerate(ports)]
        agents: list[Process] = []
        stop, errors = threading.Event(), []
        loads: list[tuple[threading.Thread, threading.Event]] = []
        pool = None
        try:
            async with httpx.AsyncClient() as client:
                for w in workers:
                    await w.start()
                for w, watcher in zip(workers, watchers, strict=True):
                    await eventually(lambda watcher=watcher: watcher.ready(client), 60,
                                     f"{watcher.name} ready:\n{tail(w.log)}")
                pool = await create_pool(pair.url, max_size=4)
                devices = [await register(pool, tmp_path, broker.url, unique, tag=f"d{i}",
                                          flush_interval="100ms", confirm_timeout="2s")
                           for i in range(DEVICES)]
                for i, dev in enumerate(devices):
                    app(dev.db, "CREATE TABLE t (id INTEGER PRIMARY KEY, n INTEGER, s TEXT, "
                                "x REAL)")
                    agents.append(Process(tmp_path / f"agent{i}.log", "agent", "--config",
                                          str(dev.config)))
                    await agents[-1].start()
                    # The load starts once the agent captures changes (its triggers).
                    await eventually(lambda dev=dev: _has_triggers(dev.db), 60,
                                     f"agent {i} capturing:\n{tail(agents[-1].log)}")
                    done = threading.Event()
                    thread = threading.Thread(target=write_load,
                                              args=(dev.db, i + 1, stop, errors, done),
                                              kwargs={"at_least": 300}, daemon=True)
                    thread.start()
                    loads.append((thread, done))
                for dev in devices:
                    await approve(pool, dev, "t", limit=60)
                await eventually(lambda: _accepted(pool, 40), 60, "batches committed")
                await pool.close()
                pool = None

                # What the primary committed, and what the promoted standby has of it.
                old = await asyncpg.connect(pair.direct(pair.primary))
                new = await asyncpg.connect(pair.direct(pair.standby))
                committed: set[object] = set()

                async def snapshot() -> None:
                    committed.update(await _batches(old))

                watching = [asyncio.create_task(w.watch(client)) for w in watchers]
                crash = time.monotonic() + mode.lag
                await pair.fail_over(lag=mode.lag, before_crash=snapshot)
                promoted = time.monotonic()
                lost = len(committed - await _batches(new))
                await asyncio.gather(old.close(timeout=1), new.close(), return_exceptions=True)
                await asyncio.wait_for(asyncio.gather(*watching), 90)
                back = max(w.up_at or 0 for w in watchers)
            if mode.lag:
                assert lost > 0, "nothing died with the primary: the test proves nothing"
            else:
                assert lost == 0, f"{lost} batches committed synchronously were lost"
            await asyncio.sleep(2)  # the load goes on against the new primary
            stop.set()
            for thread, done in loads:
                await asyncio.to_thread(done.wait, 60)
                thread.join(5)
            stopped = time.monotonic()
            assert errors == [], f"the application saw {errors[:3]}"

            held, resumed = 0.0, stopped
            if mode.confirm_after_replica:
                # Nothing confirmed while no standby follows the promoted primary.
                await asyncio.sleep(3)
                assert not await journals_drained(devices), "confirmed with no standby"
                await pair.attach(pair.add_node("standby2"), pair.standby)
                await pair.streaming(pair.standby, "async")
                resumed = time.monotonic()
                held = resumed - promoted

            pool = await create_pool(pair.url, max_size=4)
            if mode.safe:
                for dev in devices:
                    got = await wait_equal(pool, dev, "t", COLS, limit=90)
                    assert len(got) > 50
            await eventually(lambda: journals_drained(devices), 90, "journals drained")
            drained = time.monotonic()
            if not mode.safe:
                await asyncio.sleep(2)
                missing = await _missing(pool, devices)
                assert missing > 0, "the unprotected failover lost nothing"
            twice = await pool.fetchval(
                "SELECT count(*) FROM (SELECT device_id, batch_id FROM edge_export_segments "
                "GROUP BY 1, 2 HAVING count(*) > 1) d")
            assert twice == 0
            for w in workers:
                assert w.running, f"a worker exited:\n{tail(w.log)}"
            print(f"\nfailover [{mode.name}]: standby lagging {mode.lag:g} s; promote took "
                  f"{promoted - crash:.2f} s; {lost} committed batch(es) died with the "
                  "primary; outage seen by workers (/readyz 503) "
                  + ", ".join(f"{w.name} {(w.up_at or 0) - (w.down_at or 0):.1f} s"
                              for w in watchers)
                  + f"; all ready {back - crash:.1f} s after the crash; "
                  + (f"confirmations held {held:.1f} s with no standby; " if held else "")
                  + f"journals drained {drained - resumed:.1f} s after "
                  + ("a new standby streamed" if held else "the load stopped")
                  + ("" if mode.safe else f"; rows the cloud lost for good: {missing}"))
            for w in watchers:
                assert w.down_at is not None and w.up_at is not None
        finally:
            stop.set()
            if pool is not None:
                await pool.close()
            for p in agents + workers:
                await p.stop()


async def _batches(conn: asyncpg.Connection) -> set[object]:
    return {r[0] for r in await conn.fetch("SELECT batch_id FROM edge_export_segments")}


async def _missing(pool: asyncpg.Pool, devices: list[Device]) -> int:
    """Rows of SQLite the cloud does not have as they are (absent or stale)."""
    missing = 0
    for dev in devices:
        target = await target_of(pool, dev, "t")
        cloud = set(await state_rows(pool, target, dev, COLS))
        missing += sum(1 for row in sqlite_table(dev.db, "t", COLS) if row not in cloud)
    return missing


async def _accepted(pool: asyncpg.Pool, at_least: int) -> bool:
    n = await pool.fetchval("SELECT count(*) FROM edge_export_segments "
                            "WHERE outcome = 'materialized'")
    return int(n) >= at_least


async def _has_triggers(path: Path) -> bool:
    with contextlib.closing(sqlite3.connect(path, timeout=10)) as db:
        n = db.execute("SELECT count(*) FROM sqlite_schema WHERE type = 'trigger' "
                       "AND tbl_name = 't'").fetchone()[0]
    return bool(n == 3)
