"""Cloud state write-back end to end (real Mosquitto, PostgreSQL, agent and server): a
table approved as ``cloud_authoritative`` receives the cloud's rows through a
``state_write`` control; a later device edit carries ``lkcv`` and wins; a device edit
made offline against an older cloud version loses, and the cloud re-sends its row so
the device converges on the cloud's state."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from control_kit import (
    control_status,
    journal_drained,
    pending_controls,
)
from kits.e2e_kit import (
    Device,
    Wire,
    app,
    approve,
    cloud,
    eventually,
    lineage,
    pool_of,
    register,
    running_agent,
    sqlite_table,
    wait_equal,
)

from edgesync.control import write_state_rows
from edgesync.store import create_pool

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

COLS = ["id", "mode", "setpoint"]


def sqlite_row(dev: Device, key: int) -> tuple[Any, ...] | None:
    found = [r for r in sqlite_table(dev.db, "device_state", COLS) if r[0] == key]
    return found[0] if found else None


async def test_write_back_reaches_sqlite_and_lkcv_decides_conflicts(
        tmp_path: Path, database_url: str, mqtt_url: str, unique: str) -> None:
    async with Wire(mqtt_url, f"e2e-wb-{unique}/dev-wb-{unique}", unique) as wire:
        async with cloud(database_url, mqtt_url, tmp_path / "cloud", unique) as server:
            pool = pool_of(server)
            dev = await register(pool, tmp_path, mqtt_url, unique, tag="wb")
            assert dev.root == wire.root
            app(dev.db, "CREATE TABLE device_state (id INTEGER PRIMARY KEY, mode TEXT, "
                "setpoint REAL)")
            async with running_agent(dev):
                app(dev.db, ("INSERT INTO device_state VALUES (?, ?, ?)",
                             [(i, f"m{i}", i * 0.5) for i in range(1, 11)]),
                    "UPDATE device_state SET mode = 'boot' WHERE id <= 3")
                await approve(pool, dev, "device_state", sync_authority="cloud_authoritative")
                await wait_equal(pool, dev, "device_state", COLS)
                rec = await lineage(pool, dev, "device_state")
                assert rec is not None and rec["sync_authority"] == "cloud_authoritative"

                # 1. The cloud writes two rows: the state_write reaches SQLite, unjournaled.
                async with pool.acquire() as conn:
                    done = await write_state_rows(
                        conn, project_id=dev.scope.project_id, device_id=dev.id,
                        lineage_id=rec["id"],
                        rows=[{"pk": {"id": 2}, "values": {"mode": "eco", "setpoint": 19.5}},
                              {"pk": {"id": 42}, "values": {"mode": "new", "setpoint": 1.0}}])
                assert done.cloud_version == 1
                await eventually(lambda: _has(dev, 2, (2, "eco", 19.5)),
                                 what="state_write applied in SQLite")
                assert sqlite_row(dev, 42) == (42, "new", 1.0)
                (ctl,) = await pending_controls(pool, dev, "state_write")
                await eventually(lambda: control_status(pool, ctl["id"], "acked"),
                                 what="state_write acked")
                await wait_equal(pool, dev, "device_state", COLS)
                await eventually(lambda: journal_drained(dev.db), what="journal drained")
                # the cloud's own write did not travel back as a device change
                assert not [r for r in _ops(wire, 42)]

                # 2. The application edits a cloud-written key: lkcv 1 goes with it, it wins.
                app(dev.db, "UPDATE device_state SET setpoint = 21.0 WHERE id = 2")
                await wait_equal(pool, dev, "device_state", COLS)
                sent = _ops(wire, 2)
                assert sent and sent[-1].get("lkcv") == 1
                assert sqlite_row(dev, 2) == (2, "eco", 21.0)

        # 3. Device and cloud both off. The application edits key 2 (against version 1);
        # the cloud writes the same key again (version 2, waiting in the outbox). With
        # the cloud off until the device has published its edit, the device cannot get
        # version 2 first: its edit is uploaded stale (lkcv 1 < 2) and must lose.
        app(dev.db, "UPDATE device_state SET mode = 'manual', setpoint = 30.0 WHERE id = 2",
            "UPDATE device_state SET mode = 'dev' WHERE id = 5")
        offline_pool = await create_pool(database_url, max_size=1)
        try:
            async with offline_pool.acquire() as conn:
                done = await write_state_rows(
                    conn, project_id=dev.scope.project_id, device_id=dev.id,
                    lineage_id=rec["id"],
                    rows=[{"pk": {"id": 2}, "values": {"mode": "away", "setpoint": 16.0}}])
        finally:
            await offline_pool.close()
        assert done.cloud_version == 2
        async with running_agent(dev):
            stale = await eventually(
                lambda: _async([r for r in _ops(wire, 2)
                                if (r.get("row") or {}).get("mode") == "manual"]),
                what="the stale edit published")
            assert all(r.get("lkcv") == 1 for r in stale)
            async with cloud(database_url, mqtt_url, tmp_path / "cloud", unique) as server:
                pool = pool_of(server)
                await eventually(lambda: _has(dev, 2, (2, "away", 16.0)),
                                 what="device converged on the cloud's version 2")
                # the cloud kept its row and re-sent it: a state_write after version 2's
                async def resent() -> bool:
                    writes = await pending_controls(pool, dev, "state_write")
                    return any(r["pk"] == {"id": 2} and r["cloud_version"] == 2
                               for w in writes[2:] for r in w["body"]["rows"])

                await eventually(resent, what="the cloud re-sent its row to the device")
                rows = await wait_equal(pool, dev, "device_state", COLS)
                assert (5, "dev", 2.5) in rows and (2, "away", 16.0) in rows
                assert len(rows) == 11
                await eventually(lambda: journal_drained(dev.db), what="journal drained")
                # a later edit, made against version 2, wins again
                app(dev.db, "UPDATE device_state SET setpoint = 17.0 WHERE id = 2")
                rows = await wait_equal(pool, dev, "device_state", COLS)
                assert (2, "away", 17.0) in rows
                assert _ops(wire, 2)[-1].get("lkcv") == 2


def _ops(wire: Wire, key: int) -> list[dict[str, Any]]:
    return [r for b in wire.batches("device_state") for r in b["rows"] if r["pk"]["id"] == key]


async def _async(value: Any) -> Any:
    return value


async def _has(dev: Device, key: int, row: tuple[Any, ...]) -> bool:
    return sqlite_row(dev, key) == row


async def test_stale_offline_edit_and_delete_lose_against_newer_cloud_write(
        tmp_path: Path, database_url: str, mqtt_url: str, unique: str) -> None:
    """The literal order with the cloud running throughout: agent stopped, the device
    updates one cloud-written key and deletes another, the cloud writes both again
    (version 2), the agent starts. Whichever arrives first (the device's stale batch or
    the cloud's state_write), the device ends on the cloud's rows."""
    async with cloud(database_url, mqtt_url, tmp_path / "cloud", unique) as server:
        pool = pool_of(server)
        dev = await register(pool, tmp_path, mqtt_url, unique, tag="wb2")
        app(dev.db, "CREATE TABLE device_state (id INTEGER PRIMARY KEY, mode TEXT, "
            "setpoint REAL)")
        async with running_agent(dev):
            app(dev.db, ("INSERT INTO device_state VALUES (?, ?, ?)",
                         [(i, f"m{i}", i * 0.5) for i in range(1, 6)]))
            await approve(pool, dev, "device_state", sync_authority="cloud_authoritative")
            await wait_equal(pool, dev, "device_state", COLS)
            rec = await lineage(pool, dev, "device_state")
            assert rec is not None
            async with pool.acquire() as conn:
                await write_state_rows(
                    conn, project_id=dev.scope.project_id, device_id=dev.id,
                    lineage_id=rec["id"],
                    rows=[{"pk": {"id": k}, "values": {"mode": "c1"}} for k in (2, 3)])
            await eventually(lambda: _has(dev, 3, (3, "c1", 1.5)), what="version 1 applied")
            await wait_equal(pool, dev, "device_state", COLS)
            await eventually(lambda: journal_drained(dev.db), what="journal drained")
        app(dev.db, "UPDATE device_state SET mode = 'stale' WHERE id = 2",
            "DELETE FROM device_state WHERE id = 3",
            "UPDATE device_state SET mode = 'mine' WHERE id = 4")
        async with pool.acquire() as conn:
            done = await write_state_rows(
                conn, project_id=dev.scope.project_id, device_id=dev.id, lineage_id=rec["id"],
                rows=[{"pk": {"id": k}, "values": {"mode": "c2"}} for k in (2, 3)])
        assert done.cloud_version == 2
        async with running_agent(dev):
            await eventually(lambda: _has(dev, 3, (3, "c2", 1.5)),
                             what="deleted key restored from the cloud")
            await eventually(lambda: _has(dev, 2, (2, "c2", 1.0)),
                             what="stale edit replaced by the cloud's row")
            rows = await wait_equal(pool, dev, "device_state", COLS)
            assert rows == [(1, "m1", 0.5), (2, "c2", 1.0), (3, "c2", 1.5),
                            (4, "mine", 2.0), (5, "m5", 2.5)]
            await eventually(lambda: journal_drained(dev.db), what="journal drained")
