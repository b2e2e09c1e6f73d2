"""Recovery offered at the right moment, end to end (real agent, Mosquitto, PostgreSQL,
``edgesync serve`` and its HTTP API; docs/recovery.md, "Offered at the right moment").

* A real capture gap: while the agent is off, the application deletes rows and then
  updates the rest until the journal is far over ``local_retention_bytes``; started
  again, the agent drops the oldest journal rows (the deletes among them), reports the
  gap and re-seeds the table. The re-seed cannot remove the deleted rows from the cloud,
  so the lineage detail offers a re-snapshot naming the gap; taken through the API, it
  ends with the cloud equal to SQLite, and the offer is gone.
* Deleting a lineage: the DELETE answer says the device re-sends the table and that a
  verification comes next; the lineage comes back, is approved, offers a verification;
  taken, it comes back equal, and the offer is gone.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from control_kit import control_status, journal_drained
from kits.e2e_kit import (
    Device,
    app,
    approve,
    cloud,
    eventually,
    pool_of,
    register,
    running_agent,
    target_of,
    wait_equal,
    wait_lineage,
)

from edgesync import identity
from edgesync.client import ApiClient, ProjectApi
from edgesync.materialize import quote_ident
from edgesync.server import Server

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

COLS = ["id", "v"]
N = 300


async def operator(server: Server, dev: Device, tag: str, unique: str) -> ProjectApi:
    """An admin token of the device's project, and the operator CLI's HTTP client."""
    async with pool_of(server).acquire() as conn:
        boot = await identity.bootstrap(conn, org=f"org-{tag}-{unique}",
                                        project=f"e2e-{tag}-{unique}",
                                        topic_slug=f"e2e-{tag}-{unique}")
    assert boot.project_id == dev.scope.project_id and server.api is not None
    return ApiClient(server.api.url, token=boot.token.token,
                     org_id=str(boot.org_id)).project(str(boot.project_id))


async def detail(api: ProjectApi, lineage_id: Any) -> dict[str, Any]:
    doc: dict[str, Any] = await asyncio.to_thread(api.lineage, str(lineage_id))
    return doc


async def finished(pool: asyncpg.Pool, table: str, job_id: str, done: tuple[str, ...]
                   ) -> asyncpg.Record:
    async def probe() -> asyncpg.Record | None:
        rec = await pool.fetchrow(f"SELECT * FROM {table} WHERE id = $1", uuid.UUID(job_id))
        return rec if rec is not None and rec["status"] in done else None

    rec: asyncpg.Record = await eventually(probe, 90, f"{table} {job_id} finished")
    return rec


async def test_a_real_capture_gap_offers_a_resnapshot_that_makes_the_cloud_equal(
        tmp_path: Path, database_url: str, mqtt_url: str, unique: str) -> None:
    async with cloud(database_url, mqtt_url, tmp_path / "cloud", unique) as server:
        pool = pool_of(server)
        dev = await register(pool, tmp_path, mqtt_url, unique, tag="ofgap",
                             local_retention_bytes="32KiB")
        api = await operator(server, dev, "ofgap", unique)
        app(dev.db, "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
        async with running_agent(dev):
            app(dev.db, ("INSERT INTO t VALUES (?, ?)", [(i, f"v{i}") for i in
                                                          range(1, N + 1)]))
            await approve(pool, dev, "t", limit=60)
            await wait_equal(pool, dev, "t", COLS, limit=60)
            await eventually(lambda: journal_drained(dev.db), 60, "journal drained")
            rec = await wait_lineage(pool, dev, "t", lambda r: r["status"] == "active",
                                     "active")
            lineage_id = rec["id"]
            assert (await detail(api, lineage_id))["recovery_offers"] == []
        # The agent is off: the deletes are journaled first, then ~6,000 updates (about
        # 200 KB of journal for a 32 KiB budget).
        app(dev.db, "DELETE FROM t WHERE id <= 20",
            *[("UPDATE t SET v = ? WHERE id > 20", [(f"r{k}",)]) for k in range(21)])
        target = quote_ident(await target_of(pool, dev, "t"))
        async with running_agent(dev):
            gaps = await eventually(lambda: pool.fetch(
                "SELECT id, reported_at FROM edge_capture_gaps WHERE lineage_id = $1 "
                "ORDER BY id", lineage_id), 60, "the capture gap reported")

            # The re-seed refreshed every current row; the deleted ones are still there.
            async def reseeded() -> bool:
                return bool(await pool.fetchval(
                    f"SELECT count(*) = {N - 20} FROM {target} WHERE device_id = $1 AND "
                    "NOT _edge_deleted AND v = 'r20' AND id > 20", dev.id))

            await eventually(reseeded, 90, "the re-seed and the last updates written")
            assert await pool.fetchval(
                f"SELECT count(*) FROM {target} WHERE device_id = $1 AND NOT _edge_deleted "
                "AND id <= 20", dev.id) == 20
            [offer] = (await detail(api, lineage_id))["recovery_offers"]
            assert (offer["action"], offer["reason"], offer["gap_id"]) == (
                "resnapshot", "capture_gap", gaps[0]["id"])
            assert offer["since_ms"] == int(gaps[0]["reported_at"].timestamp() * 1000)

            # Taken as offered: the whole table, through the API.
            job = await asyncio.to_thread(api.resnapshot, str(lineage_id))
            assert (await detail(api, lineage_id))["recovery_offers"] == []  # under way
            done = await finished(pool, "edge_resnapshots", job["id"],
                                  ("completed", "failed"))
            assert done["status"] == "completed", done["error"]
            assert done["swept_rows"] == 20
            rows = await wait_equal(pool, dev, "t", COLS, limit=60)
            assert len(rows) == N - 20
            assert (await detail(api, lineage_id))["recovery_offers"] == []
    api.client.close()


async def test_delete_then_the_lineage_back_offers_a_verification_until_equal(
        tmp_path: Path, database_url: str, mqtt_url: str, unique: str) -> None:
    async with cloud(database_url, mqtt_url, tmp_path / "cloud", unique) as server:
        pool = pool_of(server)
        dev = await register(pool, tmp_path, mqtt_url, unique, tag="ofdel")
        api = await operator(server, dev, "ofdel", unique)
        app(dev.db, "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
        async with running_agent(dev):
            app(dev.db, ("INSERT INTO t VALUES (?, ?)", [(i, f"v{i}") for i in range(1, 31)]))
            await approve(pool, dev, "t")
            await wait_equal(pool, dev, "t", COLS)
            old = await wait_lineage(pool, dev, "t", lambda r: r["status"] == "active",
                                     "active")

            deleted = await asyncio.to_thread(api.delete_lineage, str(old["id"]))
            assert (deleted["device_will"], deleted["source_table"]) == ("resend_table", "t")
            assert (deleted["next_step"]["action"], deleted["next_step"]["reason"]) == (
                "verify", "recreated_after_delete")
            await eventually(lambda: control_status(
                pool, uuid.UUID(deleted["forget_control_id"]), "acked"), 30,
                "forget_lineage acked")
            app(dev.db, "UPDATE t SET v = 'meanwhile' WHERE id = 3")
            new = await wait_lineage(pool, dev, "t", lambda r: r["id"] != old["id"],
                                     "lineage re-created")
            assert (await detail(api, new["id"]))["recovery_offers"] == []  # under review
            await approve(pool, dev, "t")
            await wait_equal(pool, dev, "t", COLS)
            [offer] = (await detail(api, new["id"]))["recovery_offers"]
            assert (offer["action"], offer["reason"], offer["gap_id"]) == (
                "verify", "recreated_after_delete", None)
            assert offer["since_ms"] == int(new["created_at"].timestamp() * 1000)

            job = await asyncio.to_thread(api.verify, str(new["id"]))
            done = await finished(pool, "edge_verifications", job["id"],
                                  ("equal", "different", "failed"))
            assert (done["status"], done["device_rows"], done["cloud_rows"]) == (
                "equal", 30, 30), done["error"]
            assert (await detail(api, new["id"]))["recovery_offers"] == []
    api.client.close()
