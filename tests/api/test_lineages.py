"""Lineage routes: list + filters + pagination, detail, staged rows, mirror rows,
reset-materialization, delete and reopen-review."""

from __future__ import annotations

import uuid

import asyncpg
import httpx

from edgesync.ingest import Replayer


def key() -> str:
    return str(uuid.uuid4())


def idem() -> dict[str, str]:
    return {"Idempotency-Key": key()}


async def test_list_filters_and_paginates(client: httpx.AsyncClient, tenant, stage) -> None:
    a = await stage(tenant, "gw-a")
    b = await stage(tenant, "gw-b")
    r = await client.get(tenant.url("/edge/lineages"), headers=tenant.reader())
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["meta"] == {"page": 1, "limit": 50, "total": 2}
    assert {x["id"] for x in body["data"]} == {str(a.lineage_id), str(b.lineage_id)}
    assert all(x["status"] == "paused" for x in body["data"])

    r = await client.get(tenant.url("/edge/lineages"), headers=tenant.reader(),
                         params={"device_id": str(a.device.device_id)})
    assert [x["id"] for x in r.json()["data"]] == [str(a.lineage_id)]
    r = await client.get(tenant.url("/edge/lineages"), headers=tenant.reader(),
                         params={"status": "active"})
    assert r.json()["data"] == [] and r.json()["meta"]["total"] == 0

    page2 = await client.get(tenant.url("/edge/lineages"), headers=tenant.reader(),
                             params={"page": 2, "limit": 1})
    assert page2.json()["meta"] == {"page": 2, "limit": 1, "total": 2}
    assert [x["device_name"] for x in page2.json()["data"]] == ["gw-b"]

    r = await client.get(tenant.url("/edge/lineages"), headers=tenant.reader(),
                         params={"status": "sleeping"})
    assert r.status_code == 422
    assert r.json()["error"]["code"] == "VALIDATION_FAILED"
    assert r.json()["error"]["field"] == "status"


async def test_detail_staged_rows_and_mirror_rows(client: httpx.AsyncClient, tenant, stage,
                                                  pool: asyncpg.Pool) -> None:
    s = await stage(tenant)
    r = await client.get(tenant.url(f"/edge/lineages/{s.lineage_id}"), headers=tenant.reader())
    assert r.status_code == 200, r.text
    d = r.json()["data"]
    assert d["source_table"] == "device_state" and d["pause_reason"] == "schema_review"
    assert [v["status"] for v in d["schema_versions"]] == ["pending"]
    assert d["bindings"] == []
    assert d["replay"]["staged_rows"] == 2 and d["replay"]["pending_intents"] == 0
    assert d["target_rows"] is None  # no target before the approval
    assert d["materialization"]["error_count"] == 0

    r = await client.get(tenant.url(f"/edge/lineages/{s.lineage_id}/staged-rows"),
                         headers=tenant.reader(), params={"limit": 1, "page": 2})
    assert r.status_code == 200, r.text
    assert r.json()["meta"] == {"page": 2, "limit": 1, "total": 2}
    (row,) = r.json()["data"]
    assert (row["commit_seq"], row["op"], row["staging_reason"]) == (2, "insert",
                                                                      "schema_review")
    assert row["row"] == {"id": 2, "mode": "cool", "setpoint": None}

    r = await client.get(tenant.url(f"/edge/lineages/{s.lineage_id}/mirror-rows"),
                         headers=tenant.reader())
    assert r.status_code == 404 and r.json()["error"]["code"] == "MIRROR_NOT_PROVISIONED"

    review = (await client.get(tenant.url(f"/edge/schema-reviews/{s.review_id}"),
                               headers=tenant.reader())).json()["data"]
    claimed = await client.post(tenant.url(f"/edge/schema-reviews/{s.review_id}/claim"),
                                headers=tenant.headers(**{"Idempotency-Key": key()}),
                                json={"action_version": review["action_version"]})
    assert claimed.status_code == 200, claimed.text
    approved = await client.post(
        tenant.url(f"/edge/schema-reviews/{s.review_id}/approve"),
        headers=tenant.headers(**{"Idempotency-Key": key()}),
        json={"action_version": claimed.json()["data"]["action_version"]})
    assert approved.status_code == 200, approved.text
    await Replayer(pool).drain_pending()

    r = await client.get(tenant.url(f"/edge/lineages/{s.lineage_id}/mirror-rows"),
                         headers=tenant.reader(), params={"limit": 10})
    assert r.status_code == 200, r.text
    assert r.json()["meta"]["total"] == 2
    # In primary-key order, the table's own columns first (issue 27).
    assert [(x["id"], x["mode"], x["setpoint"]) for x in r.json()["data"]] == [
        (1, "heat", 20.5), (2, "cool", None)]
    assert list(r.json()["data"][0])[:4] == ["id", "mode", "setpoint", "device_id"]
    assert all(x["device_id"] == str(s.device.device_id) for x in r.json()["data"])

    d = (await client.get(tenant.url(f"/edge/lineages/{s.lineage_id}"),
                          headers=tenant.reader())).json()["data"]
    assert d["status"] == "active"
    # the rows in the target beside the writes (an updated row counts again: issue 27)
    assert d["target_rows"] == 2
    assert {b["source_column_name"] for b in d["bindings"]} == {"id", "mode", "setpoint"}
    assert d["replay"]["intents"][0]["status"] == "done"
    assert d["replay"]["intents"][0]["rows_replayed"] == 2


async def test_reset_materialization_requeues_failed_rows(client: httpx.AsyncClient, tenant,
                                                          stage, pool: asyncpg.Pool) -> None:
    s = await stage(tenant)
    await pool.execute("UPDATE edge_staged_rows SET staging_reason = 'materialization_failed' "
                       "WHERE lineage_id = $1", s.lineage_id)
    await pool.execute("UPDATE edge_table_lineages SET materialization_errors = 3, "
                       "last_error = 'boom' WHERE id = $1", s.lineage_id)
    d = (await client.get(tenant.url(f"/edge/lineages/{s.lineage_id}"),
                          headers=tenant.reader())).json()["data"]
    assert d["materialization"] == {"error_count": 3, "last_error": "boom",
                                    "failed_batches": 1, "failed_rows": 2,
                                    "quarantined_rows": 0}

    r = await client.post(tenant.url(f"/edge/lineages/{s.lineage_id}/reset-materialization"),
                          headers=tenant.headers(**{"Idempotency-Key": key()}))
    assert r.status_code == 200, r.text
    assert r.json()["data"] == {"lineage_id": str(s.lineage_id), "requeued_batches": 1,
                                "quarantined_rows": 0}
    d = (await client.get(tenant.url(f"/edge/lineages/{s.lineage_id}"),
                          headers=tenant.reader())).json()["data"]
    assert d["materialization"] == {"error_count": 0, "last_error": None,
                                    "failed_batches": 0, "failed_rows": 0,
                                    "quarantined_rows": 0}
    assert d["replay"]["pending_intents"] == 1


async def test_delete_lineage(client: httpx.AsyncClient, tenant, stage,
                              pool: asyncpg.Pool) -> None:
    s = await stage(tenant)
    r = await client.delete(tenant.url(f"/edge/lineages/{s.lineage_id}"),
                            headers=tenant.headers(**{"Idempotency-Key": key()}))
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    assert (data["id"], data["deleted"], data["device_id"], data["source_table"],
            data["device_will"], data["next_step"]["action"]) == (
        str(s.lineage_id), True, str(s.device.device_id), "device_state", "resend_table",
        "verify")
    assert await pool.fetchval("SELECT count(*) FROM edge_table_lineages WHERE id = $1",
                               s.lineage_id) == 0
    assert await pool.fetchval("SELECT count(*) FROM edge_staged_rows WHERE lineage_id = $1",
                               s.lineage_id) == 0
    # The device is told, so it starts the table over (tests/e2e/test_ctl_forget.py).
    forget = await pool.fetch("SELECT id, body, status FROM edge_pending_controls WHERE "
                              "device_id = $1 AND control_kind = 'forget_lineage'",
                              s.device.device_id)
    assert [(r["body"]["source_table"], r["status"]) for r in forget] == [
        ("device_state", "pending")]
    assert data["forget_control_id"] == str(forget[0]["id"])
    r = await client.get(tenant.url(f"/edge/lineages/{s.lineage_id}"), headers=tenant.reader())
    assert r.status_code == 404 and r.json()["error"]["code"] == "LINEAGE_NOT_FOUND"
    again = await client.delete(tenant.url(f"/edge/lineages/{s.lineage_id}"),
                                headers=tenant.headers(**{"Idempotency-Key": key()}))
    assert again.status_code == 404


async def test_reopen_review_after_a_deferred_column(client: httpx.AsyncClient, tenant,
                                                     stage) -> None:
    s = await stage(tenant)
    reopen = tenant.url(f"/edge/lineages/{s.lineage_id}/reopen-review")
    r = await client.post(reopen, headers=tenant.headers(**idem()))
    assert (r.status_code, r.json()["error"]["code"]) == (409, "CONFLICT")  # none deferred
    url = tenant.url(f"/edge/schema-reviews/{s.review_id}")
    await client.post(url + "/claim", headers=tenant.headers(**idem()),
                      json={"action_version": 1})
    r = await client.post(url + "/approve", headers=tenant.headers(**idem()), json={
        "action_version": 2, "column_actions": [
            {"source_column_name": "id", "action": "mirror"},
            {"source_column_name": "mode", "action": "mirror"},
            {"source_column_name": "setpoint", "action": "defer"}]})
    assert r.status_code == 200, r.text
    lineage = (await client.get(tenant.url(f"/edge/lineages/{s.lineage_id}"),
                                headers=tenant.reader())).json()["data"]
    assert (lineage["status"], lineage["pause_reason"]) == ("paused", "deferred_columns")

    r = await client.post(reopen, headers=tenant.reader(**idem()))
    assert r.status_code == 403
    r = await client.post(reopen, headers=tenant.headers(**idem()))
    assert r.status_code == 201, r.text
    review = r.json()["data"]
    assert (review["status"], review["lineage_id"], review["action_version"]) == (
        "queued", str(s.lineage_id), 1)
    assert review["id"] != str(s.review_id)
    r = await client.post(reopen, headers=tenant.headers(**idem()))
    assert (r.status_code, r.json()["error"]["code"]) == (409, "CONFLICT")  # already open
    r = await client.post(tenant.url(f"/edge/lineages/{uuid.uuid4()}/reopen-review"),
                          headers=tenant.headers(**idem()))
    assert (r.status_code, r.json()["error"]["code"]) == (404, "LINEAGE_NOT_FOUND")


async def test_search_every_page_and_last_batch_time(client: httpx.AsyncClient, tenant,
                                                     stage) -> None:
    """``q`` filters on the server (device name, table, pause reason; any case), so a
    console's search is not limited to the page it shows; each lineage says when its
    latest batch arrived."""
    a = await stage(tenant, "gw-north-1")
    await stage(tenant, "gw-south-1")
    await stage(tenant, "gw-north-2", table="alarms")

    async def names(**params: str | int) -> tuple[list[str], int]:
        r = await client.get(tenant.url("/edge/lineages"), headers=tenant.reader(),
                             params=params)
        assert r.status_code == 200, r.text
        body = r.json()
        return [f"{x['device_name']}/{x['source_table']}" for x in body["data"]], \
            body["meta"]["total"]

    assert await names(q="NORTH") == (["gw-north-1/device_state", "gw-north-2/alarms"], 2)
    assert await names(q="north", page=2, limit=1) == (["gw-north-2/alarms"], 2)
    assert await names(q="alarm") == (["gw-north-2/alarms"], 1)
    assert (await names(q="schema_rev"))[1] == 3
    assert await names(q="nowhere") == ([], 0)
    r = await client.get(tenant.url("/edge/lineages"), headers=tenant.reader(),
                         params={"q": "gw\x00"})  # a NUL PostgreSQL text cannot hold
    assert r.status_code == 422 and r.json()["error"]["field"] == "q", r.text
    assert await names(q="") == (
        ["gw-north-1/device_state", "gw-north-2/alarms", "gw-south-1/device_state"], 3)

    listed = (await client.get(tenant.url("/edge/lineages"), headers=tenant.reader(),
                               params={"q": "gw-north-1"})).json()["data"][0]
    detail = (await client.get(tenant.url(f"/edge/lineages/{a.lineage_id}"),
                               headers=tenant.reader())).json()["data"]
    assert listed["last_batch_at"] is not None
    assert detail["last_batch_at"] == listed["last_batch_at"]
    assert listed["last_batch_at"] >= listed["created_at"]
