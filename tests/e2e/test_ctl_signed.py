"""Signed controls end to end: with signed control on the device record and in the
agent, progress, pause and resume work through the real server; a forged, an
unsigned and a replayed control published on the device's control topic are refused
(not acknowledged, not executed, agent state unchanged)."""

from __future__ import annotations

import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from control_kit import (
    agent_knows_control,
    agent_meta_int,
    agent_table_state,
    device_paused,
    device_resumed,
    journal_drained,
)
from kits.e2e_kit import (
    Device,
    Wire,
    app,
    approve,
    cloud,
    eventually,
    pool_of,
    register,
    running_agent,
    wait_equal,
    wait_lineage,
)

from edgesync.control._signer import sign_for_device

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

COLS = ["id", "v"]


async def signed_by_cloud(pool: asyncpg.Pool, dev: Device, body: dict[str, Any]
                          ) -> dict[str, Any]:
    """A control signed with the device's next sig_seq, as the server signs them."""
    async with pool.acquire() as conn, conn.transaction():
        return await sign_for_device(conn, dev.id, {"control_id": str(uuid.uuid4()), **body},
                                     ttl=timedelta(minutes=10))


async def settle(pool: asyncpg.Pool, dev: Device, wire: Wire) -> None:
    """Publish a valid (harmless) signed control after whatever the test published, and
    wait for its ACK: controls from one publisher arrive in order, so everything
    published before it has been handled by then."""
    sentinel = await signed_by_cloud(pool, dev, {"control_kind": "progress",
                                                 "source_table": "t", "committed": []})
    await wire.publish_control(sentinel)
    await eventually(lambda: _acked(wire, sentinel["control_id"]), what="sentinel acked")


async def _acked(wire: Wire, control_id: str) -> bool:
    return wire.acked(control_id)


def refused(dev: Device, wire: Wire, doc: dict[str, Any]) -> bool:
    return not wire.acked(doc["control_id"]) and not agent_knows_control(dev.state_db,
                                                                         doc["control_id"])


async def test_signed_controls_work_and_forged_or_replayed_ones_are_refused(
        tmp_path: Path, database_url: str, mqtt_url: str, unique: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    env = f"EDGESYNC_E2E_TOKEN_{unique.upper()}"
    monkeypatch.setenv(env, "tok")
    async with cloud(database_url, mqtt_url, tmp_path / "cloud", unique) as server:
        pool = pool_of(server)
        dev = await register(pool, tmp_path, mqtt_url, unique, tag="sig",
                             policy={"max_pending_rows_per_lineage": 20},
                             signed_token="tok", token_env=env)
        app(dev.db, "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
        async with Wire(mqtt_url, dev.root, unique) as wire, running_agent(dev):
            app(dev.db, ("INSERT INTO t VALUES (?, ?)", [(i, f"v{i}") for i in range(1, 6)]))
            # Signed progress controls confirm the batches: the journal empties.
            await eventually(lambda: journal_drained(dev.db), what="signed progress applied")
            assert wire.controls("progress")
            assert all("signature" in c and "sig_seq" in c for c in wire.controls())

            # A resume signed now but held back: it becomes a stale (replayed) control.
            stale = await signed_by_cloud(pool, dev, {"control_kind": "resume_lineage",
                                                      "source_table": "t",
                                                      "server_watermark": 0})

            # Flood past the cap: a signed pause_lineage pauses the device.
            app(dev.db, ("INSERT INTO t VALUES (?, ?)", [(i, f"v{i}") for i in range(6, 41)]))
            await wait_lineage(pool, dev, "t", lambda r: r["paused_by_control"],
                               "paused by backpressure")
            await eventually(lambda: device_paused(dev.state_db, "t"), what="device paused")
            (pause,) = wire.controls("pause_lineage")
            assert agent_meta_int(dev.state_db, "last_sig_seq") > stale["sig_seq"]

            # Forged (body changed after signing), unsigned and replayed resumes: refused.
            forged = {**pause, "control_id": str(uuid.uuid4()),
                      "control_kind": "resume_lineage", "server_watermark": 0}
            unsigned = {"control_id": str(uuid.uuid4()), "control_kind": "resume_lineage",
                        "source_table": "t", "server_watermark": 0}
            for doc in (forged, unsigned, stale):
                await wire.publish_control(doc)
            await settle(pool, dev, wire)
            for doc in (forged, unsigned, stale):
                assert refused(dev, wire, doc), doc
            st = agent_table_state(dev.state_db, "t")
            assert st is not None and st["paused"] == 1

            # Approval, replay and the sweep: a signed resume_lineage; the device drains.
            await approve(pool, dev, "t")
            await eventually(lambda: device_resumed(dev.state_db, "t"), what="resumed",
                             limit=40)
            await wait_equal(pool, dev, "t", COLS)

            # The earlier pause published again (a replay of a control the device already
            # executed) is not executed again: the table keeps flowing.
            await wire.publish_control(pause)
            await settle(pool, dev, wire)
            st = agent_table_state(dev.state_db, "t")
            assert st is not None and st["paused"] == 0
            app(dev.db, ("INSERT INTO t VALUES (?, ?)", [(i, f"v{i}") for i in range(41, 61)]),
                "UPDATE t SET v = 'changed' WHERE id % 3 = 0")
            rows = await wait_equal(pool, dev, "t", COLS)
            assert len(rows) == 60
            await eventually(lambda: journal_drained(dev.db), what="journal emptied")
