"""``sync_authority`` changed after approval: to cloud_authoritative, write-back works
(existing rows carry no cloud version, so device changes still win until the cloud writes
a key); back to device_authoritative, write-back is refused, the cloud forgets its row
versions, and unacknowledged state_write controls make it ask for ``force`` first."""

from __future__ import annotations

import uuid

import asyncpg
import httpx
import pytest
from kits.review_helpers import approve

from edgesync.ingest import IngestPipeline
from edgesync.materialize import quote_ident


def idem() -> dict[str, str]:
    return {"Idempotency-Key": str(uuid.uuid4())}


async def test_change_sync_authority_after_approval(client: httpx.AsyncClient, tenant, stage,
                                                    pool: asyncpg.Pool, batches) -> None:
    s = await stage(tenant)
    url = tenant.url(f"/edge/lineages/{s.lineage_id}/sync-authority")
    rows_url = tenant.url(f"/devices/{s.device.device_id}/edge/state-tables/"
                          f"{s.lineage_id}/rows")
    to_cloud = {"sync_authority": "cloud_authoritative"}
    r = await client.post(url, headers=tenant.headers(**idem()), json=to_cloud)
    assert (r.status_code, r.json()["error"]["code"]) == (409, "CONFLICT")
    assert "when approving" in r.json()["error"]["message"]
    await approve(pool, s.lineage_id)
    table = quote_ident(await pool.fetchval(
        "SELECT target_table FROM edge_table_lineages WHERE id = $1", s.lineage_id))
    r = await client.post(rows_url, headers=tenant.headers(**idem()),
                          json={"rows": [{"pk": {"id": 1}, "values": {"mode": "eco"}}]})
    assert r.status_code == 403, r.text

    r = await client.post(url, headers=tenant.headers(**idem()), json=to_cloud)
    assert r.status_code == 200, r.text
    assert r.json()["data"] == {"lineage_id": str(s.lineage_id),
                                "sync_authority": "cloud_authoritative",
                                "previous": "device_authoritative", "changed": True,
                                "pending_state_writes": 0, "cloud_versions_cleared": 0}
    # Rows written before carry no cloud version: a device change still wins.
    f = batches()
    pipe = IngestPipeline(pool)
    topic = f"{s.device.root_topic}/sync/rows/batch"
    await pipe.handle(topic, f.payload(f.rows(("update", {"id": 2, "mode": "dev",
                                                          "setpoint": 1.0}))))
    assert await pool.fetchval(f"SELECT mode FROM {table} WHERE id = 2") == "dev"
    r = await client.post(rows_url, headers=tenant.headers(**idem()),
                          json={"rows": [{"pk": {"id": 1}, "values": {"mode": "eco"}}]})
    assert r.status_code == 200, r.text
    assert tuple(await pool.fetchrow(f"SELECT mode, _edge_cloud_version FROM {table} "
                                     "WHERE id = 1")) == ("eco", 1)

    # Back to the device: not while the device has not acknowledged the write.
    to_device = {"sync_authority": "device_authoritative"}
    r = await client.post(url, headers=tenant.headers(**idem()), json=to_device)
    assert r.status_code == 409 and "force" in r.json()["error"]["message"], r.text
    r = await client.post(url, headers=tenant.headers(**idem()), json={**to_device,
                                                                        "force": True})
    assert r.status_code == 200, r.text
    got = r.json()["data"]
    assert (got["changed"], got["pending_state_writes"], got["cloud_versions_cleared"]) == (
        True, 1, 1)
    assert await pool.fetchval(f"SELECT count(*) FROM {table} WHERE _edge_cloud_version "
                               "IS NOT NULL OR _edge_lkcv IS NOT NULL") == 0
    r = await client.post(rows_url, headers=tenant.headers(**idem()),
                          json={"rows": [{"pk": {"id": 1}, "values": {"mode": "no"}}]})
    assert (r.status_code, r.json()["error"]["code"]) == (
        403, "edge_state_not_cloud_authoritative"), r.text
    # A device change of the key the cloud wrote wins again by newer-wins alone, with an
    # lkcv the agent still quotes or without.
    await pipe.handle(topic, f.payload([{**f.rows(("update", {"id": 1, "mode": "mine",
                                                               "setpoint": 2.0}))[0],
                                         "lkcv": 1}]))
    assert await pool.fetchval(f"SELECT mode FROM {table} WHERE id = 1") == "mine"
    # The same again changes nothing; an event records each change.
    r = await client.post(url, headers=tenant.headers(**idem()), json=to_device)
    assert r.status_code == 200 and r.json()["data"]["changed"] is False
    events = await pool.fetch(
        "SELECT body->>'sync_authority' AS a, body->>'forced' AS forced FROM edge_events "
        "WHERE subject_id = $1 AND event_type = "
        "'edgesync.table_lineage.sync_authority_changed.v1' ORDER BY id", s.lineage_id)
    assert [tuple(e) for e in events] == [("cloud_authoritative", "false"),
                                          ("device_authoritative", "true")]


async def test_sync_authority_refusals_and_cli(run, tenant, stage, pool: asyncpg.Pool) -> None:
    s = await stage(tenant)
    lid = str(s.lineage_id)
    code, _, err = run("lineages", "sync-authority", lid, "cloud_authoritative", ok=False)
    assert code != 0 and "approving its review" in err, err
    await approve(pool, s.lineage_id)
    got = run.json("lineages", "sync-authority", lid, "cloud_authoritative")
    assert got["data"]["sync_authority"] == "cloud_authoritative"
    _, out, _ = run("lineages", "sync-authority", lid, "device_authoritative")
    assert "sync authority changed" in out and "device_authoritative" in out, out
    with pytest.raises(SystemExit):
        run("lineages", "sync-authority", lid, "sideways", ok=False)
