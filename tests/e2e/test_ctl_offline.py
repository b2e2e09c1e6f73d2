"""A pause decided while the device is offline still reaches it: the control waits in
the outbox (and the broker's persistent session) and is executed when the agent comes
back under the same client id; afterwards the backlog drains and nothing is lost."""

from __future__ import annotations

import uuid
from datetime import timedelta
from pathlib import Path

import asyncpg
import pytest
from control_kit import (
    control_status,
    device_paused,
    device_resumed,
    journal_count,
    journal_drained,
    pending_controls,
)
from kits.e2e_kit import (
    app,
    approve,
    cloud,
    eventually,
    lineage,
    pool_of,
    register,
    running_agent,
    wait_equal,
    wait_lineage,
)

from edgesync.control import check_backpressure
from edgesync.protocol import mqtt_client, parse_broker_url

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

COLS = ["id", "v"]


@pytest.mark.parametrize("resend", [False, True], ids=["broker-queue", "outbox-resend"])
async def test_device_offline_when_paused_gets_the_pause_on_reconnect(
        tmp_path: Path, database_url: str, mqtt_url: str, unique: str, resend: bool) -> None:
    async with cloud(database_url, mqtt_url, tmp_path / "cloud", unique,
                     resend_after=timedelta(seconds=1) if resend else None) as server:
        pool = pool_of(server)
        dev = await register(pool, tmp_path, mqtt_url, unique, tag="off",
                             policy={"max_pending_rows_per_lineage": 1000})
        app(dev.db, "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)",
            "CREATE TABLE u (id INTEGER PRIMARY KEY, v TEXT)")
        async with running_agent(dev):
            app(dev.db, ("INSERT INTO t VALUES (?, ?)", [(i, f"v{i}") for i in range(1, 31)]))
            await wait_lineage(pool, dev, "t", lambda r: r["staged_rows"] == 30,
                               "30 rows staged under review")
            await eventually(lambda: journal_drained(dev.db), what="batches confirmed")
        # The device is off. The operator lowers the cap; the cloud decides the pause from
        # the batches it already holds, in one transaction with the outbox row.
        rec = await lineage(pool, dev, "t")
        assert rec is not None
        async with pool.acquire() as conn:
            await conn.execute("UPDATE edge_projects SET policy = $2 WHERE id = $1",
                               dev.scope.project_id, {"max_pending_rows_per_lineage": 10})
            async with conn.transaction():
                assert await check_backpressure(conn, rec["id"])
        (pause,) = await pending_controls(pool, dev, "pause_lineage")
        assert pause["body"]["server_watermark"] >= 30
        await eventually(lambda: _sent(pool, pause["id"], 1),
                         what="pause published while the device is offline")
        if resend:
            # Simulate a broker that lost the queued copy: only the outbox re-send can
            # deliver it now.
            await _drop_broker_session(mqtt_url, dev.scope.device_name)
        app(dev.db, ("INSERT INTO t VALUES (?, ?)", [(i, f"v{i}") for i in range(31, 61)]))

        async with running_agent(dev):
            await eventually(lambda: device_paused(dev.state_db, "t"),
                             what="pause executed after reconnect")
            await eventually(lambda: control_status(pool, pause["id"], "acked"),
                             what="pause acked")
            if resend:
                assert await _sent(pool, pause["id"], 2)
            # Paused: t's changes stay in the journal, the cloud stages nothing more of t
            # (batches published right after the reconnect, before the queued pause was
            # read, were staged: nothing is lost). Table u proves the agent flushes.
            staged = (await lineage(pool, dev, "t"))["staged_rows"]  # type: ignore[index]
            for k in range(3):
                app(dev.db, f"UPDATE t SET v = 'w{k}' WHERE id % 5 = {k}",
                    f"INSERT INTO u VALUES ({k}, 'u{k}')")
                await wait_lineage(pool, dev, "u", lambda r, k=k: r["staged_rows"] == k + 1,
                                   "u keeps flowing")
            assert (await lineage(pool, dev, "t"))["staged_rows"] == staged  # type: ignore[index]
            assert journal_count(dev.db, "t") >= 18

            await approve(pool, dev, "t")
            await approve(pool, dev, "u")
            await wait_equal(pool, dev, "u", COLS)
            await eventually(lambda: device_resumed(dev.state_db, "t"),
                             what="resumed after approval and sweep", limit=40)
            await wait_equal(pool, dev, "t", COLS, limit=40)
            rec = await lineage(pool, dev, "t")
            assert rec is not None and rec["status"] == "active"
            await eventually(lambda: journal_drained(dev.db), what="journal emptied")


async def _sent(pool: asyncpg.Pool, control_id: uuid.UUID, times: int) -> bool:
    n = await pool.fetchval("SELECT attempts FROM edge_pending_controls WHERE id = $1",
                            control_id)
    return bool(n is not None and n >= times)


async def _drop_broker_session(mqtt_url: str, client_id: str) -> None:
    """Connect once with the device's client id and a clean session: the broker forgets
    the persistent session and whatever it had queued for it (subscriptions included;
    the agent subscribes again after every connect)."""
    async with mqtt_client(parse_broker_url(mqtt_url), identifier=client_id,
                           clean_session=True):
        pass
