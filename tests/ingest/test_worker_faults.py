"""A fleet streaming into a real ``edgesync serve`` while the worker is killed -9
mid-group (once in the middle of a PostgreSQL restart), PostgreSQL restarts and the
broker restarts: zero rows lost, zero doubled, and the worker that was not killed is
still running.

The worker acknowledges only after commit, so what a killed worker had not committed
waits, unacknowledged, on its persistent session and comes back when it does; what it
had committed comes back too (its PUBACK was lost with it) and the ledger answers
``duplicate``. Telemetry rows are appended without a per-row key: a doubled batch
would show as doubled rows.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import aiomqtt
import asyncpg
import pytest
from broker.broker_helpers import Mosquitto, free_port, until
from ingest.ingest_kit import fleet, tm_topic, topic
from kits.fault_kit import servers, tail
from kits.telemetry_payloads import T0, Telemetry

from edgesync.materialize import quote_ident
from edgesync.protocol import BrokerUrl, mqtt_client
from edgesync.store import create_pool, migrate

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.once]

EDGESYNC = shutil.which("edgesync", path=str(Path(sys.executable).parent)) or "edgesync"
DEVICES = 30
ROUNDS = 24
T1 = T0 + timedelta(hours=1)  # after the sample that approved the table


def serve(database_url: str, port: int, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "EDGESYNC_LOG_LEVEL": os.environ.get("FAULT_LOG", "INFO")}
    with log.open("ab") as out:
        return subprocess.Popen(
            [EDGESYNC, "serve", "--database-url", database_url,
             "--mqtt-url", f"mqtt://127.0.0.1:{port}", "--client-id", "fault-worker"],
            stdout=out, stderr=subprocess.STDOUT, env=env)


def stop(worker: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after 60 s."""
    if worker.poll() is None:
        worker.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            worker.wait(timeout=60)
    if worker.poll() is None:
        worker.kill()


async def publish_all(url: BrokerUrl, messages: list[tuple[str, bytes]],
                      progress: list[int]) -> None:
    """Publish every message QoS 1, reconnecting through broker restarts."""
    i = 0
    while i < len(messages):
        try:
            async with mqtt_client(url, identifier="fault-fleet", clean_session=True) as c:
                while i < len(messages):
                    await c.publish(*messages[i], qos=1)
                    i += 1
                    progress[0] = i
                    if i % 20 == 0:
                        await asyncio.sleep(0.05)  # a fleet, not a flood
        except aiomqtt.MqttError:
            await asyncio.sleep(0.3)


def stream(scopes: list[Any], factories: list[Any]
           ) -> tuple[list[tuple[str, bytes]], set[tuple[Any, int]]]:
    """ROUNDS rounds of a state batch (3 new keys) and a telemetry batch (4 samples) per
    device; and the state keys they leave."""
    telemetry = [Telemetry() for _ in scopes]
    for t in telemetry:
        t.seq = 1  # after the approving batch of the first device (others: any start)
    messages: list[tuple[str, bytes]] = []
    expected_state: set[tuple[Any, int]] = set()
    for r in range(ROUNDS):
        for s, f, t in zip(scopes, factories, telemetry, strict=True):
            keys = range(r * 3 + 1, r * 3 + 4)
            messages.append((topic(s), f.payload(f.rows(*[
                ("insert", {"id": k, "mode": f"r{r}", "setpoint": float(k)}) for k in keys]),
                with_schema=False)))
            expected_state.update((s.device_id, k) for k in keys)
            messages.append((tm_topic(s), t.samples(
                *[(T1 + timedelta(minutes=r, seconds=i), float(i)) for i in range(4)])))
    return messages, expected_state


def persistent_broker(tmp_path: Path) -> tuple[Mosquitto, int]:
    port = free_port()
    conf = tmp_path / "mosquitto.conf"
    conf.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\n"
                    "max_inflight_messages 0\nmax_queued_messages 0\n"
                    # Run as root (CI), it would drop to a user that cannot write here.
                    f"persistence true\npersistence_location {tmp_path}/\nuser root\n")
    return Mosquitto(conf, tmp_path / "mosquitto.log"), port


async def exactly_once(pool: Any, scopes: list[Any], table: str, messages: list[Any],
                       expected_state: set[tuple[Any, int]]) -> None:
    """Every state key and every telemetry sample once; every batch once in the ledger."""
    ids = [s.device_id for s in scopes]
    state = await pool.fetch(f"SELECT device_id, id FROM {quote_ident(table)} "
                             "WHERE device_id = ANY($1::uuid[]) AND id > 0", ids)
    assert {(r["device_id"], r["id"]) for r in state} == expected_state
    ts_table = await pool.fetchval(
        "SELECT target_table FROM edge_table_lineages WHERE device_id = $1 AND pipeline = "
        "'telemetry'", scopes[0].device_id)
    rows = await pool.fetch(f"SELECT device_id, event_ts, count(*) AS n FROM "
                            f"{quote_ident(ts_table)} WHERE device_id = ANY($1::uuid[]) "
                            "AND event_ts >= $2 GROUP BY 1, 2", ids, T1)
    assert len(rows) == DEVICES * ROUNDS * 4  # every sample...
    assert {r["n"] for r in rows} == {1}  # ...once
    # Each batch once in the ledger, none refused (the seed batches of the approval were
    # staged, then replayed).
    outcomes = await pool.fetch(
        "SELECT outcome, count(*) AS n, count(DISTINCT batch_id) AS ids "
        "FROM edge_export_segments WHERE device_id = ANY($1::uuid[]) GROUP BY 1", ids)
    by = {r["outcome"]: (r["n"], r["ids"]) for r in outcomes}
    assert set(by) <= {"materialized", "staged"}
    assert by["materialized"] == (len(messages), len(messages))


def no_error_logged(log: Path) -> None:
    """No error of ours. (paho may still register a write on a socket the broker just
    closed; the event loop logs that race in the MQTT library, harmlessly.)"""
    text = log.read_text(errors="replace")
    assert not re.search(r" (ERROR|CRITICAL) edgesync", text), text[-4000:]


async def test_kill_9_and_broker_restart_lose_and_double_nothing(
        pool, database_url, batches, unique, tmp_path: Path) -> None:
    scopes, factories, table = await fleet(pool, batches, unique, DEVICES, telemetry=True)
    messages, expected_state = stream(scopes, factories)

    broker, port = persistent_broker(tmp_path)
    await broker.start([port])
    url = BrokerUrl(host="127.0.0.1", port=port, tls=False)
    log = tmp_path / "serve.log"
    worker = serve(database_url, port, log)
    progress = [0]
    ledger = "SELECT count(*) FROM edge_export_segments WHERE device_id = ANY($1::uuid[]) " \
             "AND outcome = 'materialized'"
    ids = [s.device_id for s in scopes]
    base = await pool.fetchval(ledger, ids)
    try:
        async def subscribed() -> bool:
            return "ingest subscribed" in log.read_text(errors="replace")

        # A start-up on a busy machine (CI runs other suites' servers too) can be slow.
        await until(subscribed, limit=120)
        sender = asyncio.create_task(publish_all(url, messages, progress))

        async def committed(n: int) -> bool:
            return await pool.fetchval(ledger, ids) - base >= n

        # Killed mid-stream: some groups committed, some in flight, more queued.
        await until(lambda: committed(len(messages) // 4), limit=120)
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=30)
        await asyncio.sleep(0.5)
        worker = serve(database_url, port, log)
        await until(lambda: committed(len(messages) // 2), limit=120)
        # The broker restarts under load; the worker reconnects by itself.
        await broker.stop()
        await asyncio.sleep(0.5)
        await broker.start([port])
        await sender
        async with asyncio.timeout(240):
            while not await committed(len(messages)):
                assert worker.poll() is None, log.read_text(errors="replace")[-4000:]
                await asyncio.sleep(0.5)
        assert worker.poll() is None  # the restarted worker survived the broker restart
    except BaseException:
        done = await pool.fetchval(ledger, ids) - base
        activity = await pool.fetch("SELECT state, wait_event, left(query, 80) AS q FROM "
                                    "pg_stat_activity WHERE datname = current_database()")
        print(f"published {progress[0]}, committed {done} of {len(messages)}; "
              f"{[tuple(r) for r in activity]}; serve log:")
        print(log.read_text(errors="replace")[-6000:])
        shutil.copy(log, "/tmp/fault-serve.log")
        raise
    finally:
        stop(worker)
        await broker.stop()

    await exactly_once(pool, scopes, table, messages, expected_state)
    no_error_logged(log)


async def test_kill_9_during_a_database_restart_loses_and_doubles_nothing(
        batches, unique) -> None:
    """On a cluster and a broker of the test's own: PostgreSQL restarted under load with
    the worker killed -9 in the middle of the restart, then PostgreSQL restarted again
    and the broker too, both under the new worker, which rides them out."""
    async with servers() as (cluster, _, root):
        # The fleet here never re-sends: the broker must keep what it queued for the
        # worker across its restart (persistence it can write, as root).
        broker, port = persistent_broker(root)
        await broker.start([port])
        pool = await create_pool(cluster.url, max_size=4)
        try:
            async with pool.acquire() as conn:
                await migrate(conn)
            scopes, factories, table = await fleet(pool, batches, unique, DEVICES,
                                                   telemetry=True)
            messages, expected_state = stream(scopes, factories)
            ids = [s.device_id for s in scopes]
            log = root / "serve.log"
            worker = serve(cluster.url, port, log)
            progress = [0]
            try:
                await until(lambda: logged(log, "ingest subscribed"), limit=120)
                url = BrokerUrl(host="127.0.0.1", port=port, tls=False)
                sender = asyncio.create_task(publish_all(url, messages, progress))

                async def committed(n: int) -> bool:
                    try:
                        done = await pool.fetchval(
                            "SELECT count(*) FROM edge_export_segments WHERE device_id = "
                            "ANY($1::uuid[]) AND outcome = 'materialized'", ids)
                    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
                        return False  # the test's own connection met the restart
                    return bool(done >= n)

                await until(lambda: committed(len(messages) // 4), limit=120)
                restart = asyncio.create_task(cluster.restart())
                await asyncio.sleep(0.2)  # the fast shutdown under way: groups abort
                worker.send_signal(signal.SIGKILL)
                worker.wait(timeout=30)
                await restart
                worker = serve(cluster.url, port, log)
                await until(lambda: committed(len(messages) // 2), limit=120)
                await cluster.restart()  # under the new worker
                assert worker.poll() is None, tail(log)
                await until(lambda: committed(3 * len(messages) // 4), limit=120)
                await broker.stop()
                await asyncio.sleep(0.5)
                await broker.start([port])
                await sender
                await until(lambda: committed(len(messages)), limit=240)
                assert worker.poll() is None, tail(log)  # rode out both restarts
            except BaseException:
                print(f"published {progress[0]} of {len(messages)}; serve log:\n{tail(log)}")
                shutil.copy(log, "/tmp/fault-serve-db.log")
                raise
            finally:
                stop(worker)
            await exactly_once(pool, scopes, table, messages, expected_state)
            no_error_logged(log)
        finally:
            await pool.close()
            await broker.stop()


async def logged(log: Path, text: str) -> bool:
    def has() -> bool:
        return log.exists() and text in log.read_text("utf-8", "replace")

    return await asyncio.to_thread(has)
