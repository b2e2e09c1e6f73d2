"""Cloud state write-back: the cloud's rows land in the state table and a state_write
control carrying them and their cloud_version is queued for the device."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest
from kits.review_helpers import approve

from edgesync import fleet
from edgesync.control import StateWrite, write_state_rows
from edgesync.errors import InvalidRequestError, StateWriteError
from edgesync.ingest import IngestPipeline, Replayer
from edgesync.materialize import quote_ident


async def setup_lineage(pool: asyncpg.Pool, batches: Any, unique: str,
                        authority: str | None, actions: list[dict[str, Any]] | None = None
                        ) -> tuple[fleet.DeviceScope, Any]:
    async with pool.acquire() as conn:
        scope = await fleet.add_device(conn, project=f"wb-{unique}", name=f"gw-{unique}",
                                       topic_slug=f"wb-{unique}")
    f = batches()
    out = await IngestPipeline(pool).handle(f"{scope.root_topic}/sync/rows/batch", f.payload(
        f.rows(("insert", {"id": 1, "mode": "heat", "setpoint": 20.0}))))
    if authority is not None:
        await approve(pool, out.lineage_id, actions, sync_authority=authority)
        await Replayer(pool).drain_pending()
    return scope, out.lineage_id


async def write(pool: asyncpg.Pool, scope: fleet.DeviceScope, lineage_id: Any,
                rows: Any) -> StateWrite:
    async with pool.acquire() as conn:
        return await write_state_rows(conn, project_id=scope.project_id,
                                      device_id=scope.device_id, lineage_id=lineage_id,
                                      rows=rows)


async def test_write_back_upserts_and_queues_state_write(pool, batches, unique):
    scope, lineage_id = await setup_lineage(pool, batches, unique, "cloud_authoritative")
    result = await write(pool, scope, lineage_id, [
        {"pk": {"id": 1}, "values": {"mode": "cooling", "setpoint": 21}},
        {"pk": {"id": 2}, "values": {"mode": "fan"}},
    ])
    assert (result.rows_written, result.cloud_version) == (2, 1)
    table = await pool.fetchval("SELECT target_table FROM edge_table_lineages WHERE id = $1",
                                lineage_id)
    rows = await pool.fetch(f"SELECT id, mode, setpoint, _edge_cloud_version FROM "
                            f"{quote_ident(table)} ORDER BY id")
    assert [tuple(r) for r in rows] == [(1, "cooling", 21.0, 1), (2, "fan", None, 1)]
    control = await pool.fetchrow("SELECT control_kind, body, status FROM edge_pending_controls "
                                  "WHERE id = $1::uuid", result.control_id)
    assert control["control_kind"] == "state_write" and control["status"] == "pending"
    assert control["body"]["rows"][0] == {"pk": {"id": 1}, "cloud_version": 1,
                                          "values": {"mode": "cooling", "setpoint": 21}}
    again = await write(pool, scope, lineage_id, [{"pk": {"id": 2}, "values": {"mode": "off"}}])
    assert again.cloud_version == 2


async def test_write_back_refusals(pool, batches, unique):
    scope, device_owned = await setup_lineage(pool, batches, unique, "device_authoritative")
    with pytest.raises(StateWriteError) as exc:
        await write(pool, scope, device_owned, [{"pk": {"id": 1}, "values": {"mode": "x"}}])
    assert exc.value.code == "edge_state_not_cloud_authoritative"

    scope2, under_review = await setup_lineage(pool, batches, unique + "r", None)
    with pytest.raises(StateWriteError) as exc:  # not approved: 404, not "device-owned"
        await write(pool, scope2, under_review, [{"pk": {"id": 1}, "values": {"mode": "x"}}])
    assert exc.value.code == "edge_state_mirror_not_provisioned"
    async with pool.acquire() as conn:
        await conn.execute("UPDATE edge_table_lineages SET sync_authority = "
                           "'cloud_authoritative' WHERE id = $1", under_review)
    with pytest.raises(StateWriteError) as exc:
        await write(pool, scope2, under_review, [{"pk": {"id": 1}, "values": {"mode": "x"}}])
    assert exc.value.code == "edge_state_mirror_not_provisioned"

    scope3, lineage_id = await setup_lineage(pool, batches, unique + "c", "cloud_authoritative")
    bad = {
        "rows": [],
        "rows[0].pk": [{"pk": {"mode": "x"}, "values": {"mode": "y"}}],
        "rows[0].values": [{"pk": {"id": 1}, "values": {"nope": 1}}],
        "rows[0]": [{"pk": {"id": 1}, "values": {"setpoint": "warm"}}],
    }
    for field, rows in bad.items():
        with pytest.raises(InvalidRequestError) as err:
            await write(pool, scope3, lineage_id, rows)
        assert err.value.field == field
    with pytest.raises(InvalidRequestError):
        await write(pool, scope3, lineage_id, [{"pk": {"id": i}, "values": {"mode": "m"}}
                                               for i in range(501)])
    # Nothing half-written by the refused requests.
    version = await pool.fetchval("SELECT cloud_version FROM edge_table_lineages WHERE id = $1",
                                  lineage_id)
    assert version == 0


async def test_write_back_by_source_or_mirror_name(pool, batches, unique):
    """A renamed column may be written by its mirror name (what the operator sees in the
    table) or its source name; the device's control always carries the source name."""
    renamed = [{"source_column_name": "id", "action": "mirror"},
               {"source_column_name": "mode", "action": "mirror",
                "mirror_column_name": "hvac_mode"},
               {"source_column_name": "setpoint", "action": "mirror"}]
    scope, lineage_id = await setup_lineage(pool, batches, unique, "cloud_authoritative",
                                            renamed)
    result = await write(pool, scope, lineage_id, [
        {"pk": {"id": 1}, "values": {"hvac_mode": "cool"}},
        {"pk": {"id": 2}, "values": {"mode": "fan", "setpoint": 19}}])
    table = await pool.fetchval("SELECT target_table FROM edge_table_lineages WHERE id = $1",
                                lineage_id)
    rows = await pool.fetch(f"SELECT id, hvac_mode, setpoint FROM {quote_ident(table)} "
                            "ORDER BY id")
    assert [tuple(r) for r in rows] == [(1, "cool", 20.0), (2, "fan", 19.0)]
    body = await pool.fetchval("SELECT body FROM edge_pending_controls WHERE id = $1::uuid",
                               result.control_id)
    assert [r["values"] for r in body["rows"]] == [{"mode": "cool"},
                                                   {"mode": "fan", "setpoint": 19}]
    for values, message in [
        ({"nope": 1}, "column 'nope' is not mirrored in this table; name a column by its "
                      "source or mirror name: id, mode (mirror hvac_mode), setpoint"),
        ({"mode": "a", "hvac_mode": "b"}, "column 'mode' is named twice (by its source and "
                                          "its mirror name)")]:
        with pytest.raises(InvalidRequestError) as err:
            await write(pool, scope, lineage_id, [{"pk": {"id": 1}, "values": values}])
        assert (err.value.field, err.value.reason) == ("rows[0].values", message)


async def test_device_changes_against_an_older_cloud_version_lose(pool, batches, unique):
    """The lkcv rule: a device change applies only if the device had seen the row's latest
    cloud version; otherwise the cloud keeps its row and sends it to the device again."""
    scope, lineage_id = await setup_lineage(pool, batches, unique, "cloud_authoritative")
    await write(pool, scope, lineage_id, [{"pk": {"id": 1}, "values": {"mode": "cloud"}}])
    pipe = IngestPipeline(pool)
    topic = f"{scope.root_topic}/sync/rows/batch"
    f = batches()
    f.epoch = await pool.fetchval(  # continue the device's journal epoch
        "SELECT journal_epoch::text FROM edge_export_segments WHERE device_id = $1 LIMIT 1",
        scope.device_id)
    f.seq = 10
    table = await pool.fetchval("SELECT target_table FROM edge_table_lineages WHERE id = $1",
                                lineage_id)

    async def mode() -> str:
        return str(await pool.fetchval(f"SELECT mode FROM {quote_ident(table)} WHERE id = 1"))

    # Made before the device applied cloud version 1: no lkcv → the cloud's row stays.
    stale = f.rows(("update", {"id": 1, "mode": "device-stale", "setpoint": 1.0}))
    await pipe.handle(topic, f.payload(stale))
    assert await mode() == "cloud"
    resent = await pool.fetch(
        "SELECT body FROM edge_pending_controls WHERE lineage_id = $1 AND "
        "control_kind = 'state_write' ORDER BY created_at", lineage_id)
    assert len(resent) == 2
    assert resent[-1]["body"]["rows"] == [
        {"pk": {"id": 1}, "values": {"mode": "cloud", "setpoint": 20.0}, "cloud_version": 1}]
    # Made after applying version 1 (lkcv = 1): the device's change wins.
    fresh = f.rows(("update", {"id": 1, "mode": "device-new", "setpoint": 2.0}))
    fresh[0]["lkcv"] = 1
    await pipe.handle(topic, f.payload(fresh))
    assert await mode() == "device-new"
    # Other keys are untouched by the rule (no cloud version on them).
    await pipe.handle(topic, f.payload(f.rows(("insert", {"id": 5, "mode": "d",
                                                          "setpoint": 0.5}))))
    assert await pool.fetchval(f"SELECT mode FROM {quote_ident(table)} WHERE id = 5") == "d"
