"""A RabbitMQ cluster of three nodes loses one node, then another (issue 30, point 2).

The test starts its own cluster (``rabbit_cluster``: own node names, ports, data
directories and Erlang cookie, the MQTT plugin on every node). Two ``edgesync serve``
workers consume the ingest quorum queue (``--amqp-url`` and ``--mqtt-url`` naming every
node) and two real agents (``edgesync agent run``, ``connection.server_urls`` naming every
node) publish what applications keep writing into their SQLite. Worker 1 and agent 1 talk
to node 1 first, worker 2 and agent 2 to node 2. Node 1's beam process is killed with
SIGKILL and started again, then node 2's. While two nodes of three are up, rows keep
arriving; at the end the cloud equals SQLite (nothing lost), the ledger has each batch
once (nothing doubled) and every journal drained (every confirmation reached its device).

Durable MQTT sessions (the agents' ``clean_session: false``) live in classic queues on the
node the device connected to: the test mirrors them with a policy (``ha-mode: all``,
docs/production.md), without which a device cannot subscribe elsewhere while that node is
down.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
import time
import uuid
from pathlib import Path

import asyncpg
import pytest
from kits.e2e_kit import Device, app, approve, eventually, register, wait_equal
from rabbit_cluster import Node, rabbit_cluster
from scale_kit import Worker

pytestmark = [pytest.mark.e2e, pytest.mark.once, pytest.mark.timeout(300)]

COLS = ["id", "n", "s"]
OUTAGE_S = 12.0  # each node stays down this long
QUEUE = "edgesync.ingest"  # the workers' default --amqp-queue


def paced_load(path: Path, stop: threading.Event, errors: list[BaseException]) -> None:
    """An application: inserts and updates in small transactions, ~40 a second."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA busy_timeout = 5000")
    try:
        i = 0
        while not stop.is_set():
            i += 1
            db.execute("BEGIN")
            db.execute("INSERT INTO t VALUES (?, ?, ?)", (i, 0, f"r{i}"))
            if i > 5:
                db.execute("UPDATE t SET n = n + 1, s = s || '.' WHERE id = ?", (i - 5,))
            db.execute("COMMIT")
            stop.wait(0.025)
    except BaseException as exc:
        errors.append(exc)
    finally:
        db.close()


def journal_count(db: Path) -> int:
    with contextlib.closing(sqlite3.connect(db, timeout=10)) as conn:
        return int(conn.execute("SELECT count(*) FROM __edgesync_journal").fetchone()[0])


async def batches(pool: asyncpg.Pool, device_id: uuid.UUID) -> int:
    return int(await pool.fetchval(
        "SELECT count(*) FROM edge_export_segments WHERE device_id = $1", device_id))


def server_urls(nodes: list[Node], first: int) -> str:
    turn = nodes[first:] + nodes[:first]
    return "".join(f"\n    - {n.mqtt_url}" for n in turn)


class Progress:
    """Samples each device's ledger every 0.2 s: the longest stall after a moment is the
    outage the device saw end to end (agent → node → queue → worker → commit)."""

    def __init__(self, pool: asyncpg.Pool, devices: list[Device]) -> None:
        self.pool, self.devices = pool, devices
        self.samples: list[tuple[float, list[int]]] = []

    async def run(self) -> None:
        while True:
            with contextlib.suppress(OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
                counts = [await batches(self.pool, d.id) for d in self.devices]
                self.samples.append((time.monotonic(), counts))
            await asyncio.sleep(0.2)

    def grew(self, since: float) -> list[int]:
        """Batches committed per device since ``since``."""
        before = [s for s in self.samples if s[0] <= since][-1][1]
        return [now - then for now, then in zip(self.samples[-1][1], before, strict=True)]

    def longest_stall(self, since: float, until: float) -> list[float]:
        out = []
        for n in range(len(self.devices)):
            last_change, last, worst = since, None, 0.0
            for t, counts in self.samples:
                if t < since or t > until:
                    continue
                if last is not None and counts[n] != last:
                    worst = max(worst, t - last_change)
                    last_change = t
                last = counts[n]
            out.append(round(max(worst, until - last_change), 1))
        return out


def lines(worker: Worker, text: str) -> int:
    return worker.text().count(text)


async def back_after(proc: Worker, text: str, before: int, since: float) -> float:
    """Seconds from ``since`` until ``proc`` logged ``text`` once more than ``before``."""
    await eventually(lambda: _true(lines(proc, text) > before), 60,
                     f"{proc.name}: {text!r} again")
    return round(time.monotonic() - since, 1)


async def in_sync(node: Node) -> bool:
    """Every member of the ingest quorum queue leader or follower, none behind the
    leader's commit index by more than a few entries (writes go on meanwhile)."""
    try:
        members = await asyncio.to_thread(node.quorum_status, QUEUE)
        states = {m["Raft State"] for m in members}
        commit = max(int(m["Commit Index"]) for m in members)
    except (RuntimeError, ValueError, KeyError):  # a member not answering yet
        return False
    return (len(members) == 3 and states <= {"leader", "follower"} and "leader" in states
            and all(commit - int(m["Commit Index"]) < 50 for m in members))


async def _true(value: bool) -> bool:
    return value


async def test_a_cluster_losing_a_node_then_another_loses_and_doubles_nothing(
        tmp_path: Path, pool: asyncpg.Pool, database_url: str, unique: str) -> None:
    figures: dict[str, object] = {}
    t0 = time.monotonic()
    with rabbit_cluster(tmp_path / "rabbit", unique[:8]) as nodes:
        figures["cluster up (s)"] = round(time.monotonic() - t0, 1)
        # Durable MQTT sessions (the agents' control subscriptions) mirrored on every node.
        nodes[0].ctl("set_policy", "edgesync-mqtt-sessions", "^mqtt-subscription-",
                     '{"ha-mode":"all","ha-sync-mode":"automatic"}', "--apply-to", "queues")
        amqp = [n.amqp_url for n in nodes]
        mqtt = [n.mqtt_url for n in nodes]
        workers = [Worker(f"w{n + 1}", tmp_path / f"w{n + 1}.log", [
            "--database-url", database_url,
            "--mqtt-url", ",".join(mqtt[n:] + mqtt[:n]),
            "--amqp-url", ",".join(amqp[n:] + amqp[:n]),
            "--client-id", f"w{n + 1}-{unique}", "--api-port", "0",
            "--data-dir", str(tmp_path / f"w{n + 1}")]) for n in (0, 1)]
        devices = []
        for n in (0, 1):
            dev = await register(pool, tmp_path, nodes[0].mqtt_url, unique, tag=f"c{n + 1}",
                                 flush_interval="200ms", confirm_timeout="3s")
            text = dev.config.read_text()
            dev.config.write_text(text.replace(f"  server_url: {nodes[0].mqtt_url}\n",
                                               f"  server_urls:{server_urls(nodes, n)}\n"))
            app(dev.db, "CREATE TABLE t (id INTEGER PRIMARY KEY, n INTEGER, s TEXT)")
            devices.append(dev)
        agents = [Worker(f"a{n + 1}", tmp_path / f"a{n + 1}.log",
                         ["--config", str(d.config)], command=("agent", "run"))
                  for n, d in enumerate(devices)]
        stop = threading.Event()
        errors: list[BaseException] = []
        loads = [threading.Thread(target=paced_load, args=(d.db, stop, errors), daemon=True)
                 for d in devices]
        progress = Progress(pool, devices)
        sampling = asyncio.create_task(progress.run())
        try:
            for w in workers:
                await w.start("ingest consuming")
            for a in agents:
                await a.start("connected to")
            for load in loads:
                load.start()
            for d in devices:
                await approve(pool, d, "t", limit=60)
            await asyncio.sleep(3)

            for n, (worker, agent) in enumerate(zip(workers, agents, strict=True)):
                node = nodes[n]
                consuming = lines(worker, "ingest consuming")
                connected = lines(agent, "connected to")
                killed = time.monotonic()
                await asyncio.to_thread(node.kill9)
                worker_back, agent_back = await asyncio.gather(
                    back_after(worker, "ingest consuming", consuming, killed),
                    back_after(agent, "connected to", connected, killed))
                await asyncio.sleep(max(0.0, OUTAGE_S - (time.monotonic() - killed)))
                down = time.monotonic()
                grew = progress.grew(killed + max(worker_back, agent_back))
                assert not sampling.done(), sampling
                assert all(g > 0 for g in grew), (
                    f"node {n + 1} down: batches committed per device {grew}; samples "
                    f"{[(round(t - killed, 1), c) for t, c in progress.samples[-80::8]]}\n"
                    + "\n".join(f"--- {p.name}:\n{p.text()[-3000:]}" for p in (*workers, *agents)))
                figures[f"node {n + 1} down"] = {
                    "worker reconsuming after (s)": worker_back,
                    "agent reconnected after (s)": agent_back,
                    "longest ledger stall per device (s)": progress.longest_stall(killed,
                                                                                  down),
                    "batches committed while down": progress.grew(killed)}
                restarting = time.monotonic()
                await asyncio.to_thread(node.start)
                await asyncio.to_thread(node.wait_up)
                figures[f"node {n + 1} restarted in (s)"] = round(time.monotonic()
                                                                  - restarting, 1)
                # "Later, another node": once the queue's member on the restarted node
                # caught up. Before that, losing a second node leaves no majority that
                # can commit (a member still fetching the log does not count).
                await eventually(lambda n=n: in_sync(nodes[2 - n]), 60,
                                 f"node {n + 1}: queue member in sync")
                figures[f"node {n + 1} queue member in sync after (s)"] = round(
                    time.monotonic() - restarting, 1)
                await asyncio.sleep(3)

            stop.set()
            for load in loads:
                load.join(30)
            assert errors == [], f"the applications saw {errors[:3]}"
            stopped = time.monotonic()
            for d in devices:
                got = await wait_equal(pool, d, "t", COLS, limit=90)
                assert len(got) > 500
            figures["catch-up after writes stopped (s)"] = round(time.monotonic() - stopped, 1)
            for d in devices:
                await eventually(lambda d=d: _true(journal_count(d.db) <= 1), 60,
                                 f"{d.scope.device_name}: journal drained "
                                 f"(has {journal_count(d.db)} rows)")
            figures["journals drained after (s)"] = round(time.monotonic() - stopped, 1)
            for d in devices:
                twice = await pool.fetchval(
                    "SELECT count(*) FROM (SELECT batch_id FROM edge_export_segments "
                    "WHERE device_id = $1 GROUP BY batch_id HAVING count(*) > 1) x", d.id)
                assert twice == 0, f"{d.scope.device_name}: {twice} batches in the ledger twice"
                rejected = await pool.fetchval(
                    "SELECT count(*) FROM edge_export_segments WHERE device_id = $1 "
                    "AND outcome = 'rejected'", d.id)
                assert rejected == 0
            figures["batches"] = [await batches(pool, d.id) for d in devices]
            for proc in (*workers, *agents):
                assert proc.running, f"{proc.name} exited:\n{proc.text()[-4000:]}"
                # No ERROR of edgesync's own. (aiormq logs a lost connection with its
                # traceback as a warning; paho, under the logger "mqtt", logs the reset of
                # a killed node's socket as an ERROR, which the agent then reports as the
                # warning it is, "reconnecting in …".)
                errors = [line for line in proc.text().splitlines()
                          if " ERROR " in line and " ERROR mqtt: " not in line]
                assert errors == [], proc.text()[-4000:]
        finally:
            stop.set()
            sampling.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sampling
            for proc in (*agents, *workers):
                await proc.stop()
    figures["total (s)"] = round(time.monotonic() - t0, 1)
    print("\nbroker cluster figures:")
    for key, value in figures.items():
        print(f"  {key}: {value}")
