"""Quarantined rows through the HTTP API and the CLI: list, inspect, edit-and-retry,
retry all, discard; supersession by a newer change; the breaker never counts them."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
import httpx
from kits.review_helpers import approve

from edgesync.ingest import IngestPipeline, OutcomeStatus, Replayer
from edgesync.materialize import quote_ident


def idem() -> dict[str, str]:
    return {"Idempotency-Key": str(uuid.uuid4())}


async def live(pool: asyncpg.Pool, stage: Any, tenant: Any, batches: Any) -> Any:
    """An approved, live lineage and a factory of its batches."""
    s = await stage(tenant)
    await approve(pool, s.lineage_id)
    await Replayer(pool).drain_pending()
    return s, batches(), IngestPipeline(pool)


async def mirror(pool: asyncpg.Pool, lineage_id: uuid.UUID) -> dict[int, Any]:
    table = await pool.fetchval("SELECT target_table FROM edge_table_lineages WHERE id = $1",
                                lineage_id)
    rows = await pool.fetch(f"SELECT id, setpoint FROM {quote_ident(table)} "
                            "WHERE NOT _edge_deleted")
    return {r["id"]: r["setpoint"] for r in rows}


async def test_list_inspect_edit_retry_supersede_retry_all_discard(
        client: httpx.AsyncClient, tenant, stage, pool: asyncpg.Pool, batches) -> None:
    s, f, pipe = await live(pool, stage, tenant, batches)
    topic = f"{s.device.root_topic}/sync/rows/batch"
    table = await pool.fetchval("SELECT target_table FROM edge_table_lineages WHERE id = $1",
                                s.lineage_id)
    # The encoder refuses one row (a string for a REAL column); PostgreSQL another (a
    # CHECK constraint an operator added): both quarantined, their neighbours written.
    await pool.execute(f"ALTER TABLE {quote_ident(table)} ADD CONSTRAINT cap "
                       "CHECK (setpoint < 100) NOT VALID")
    out = await pipe.handle(topic, f.payload(f.rows(
        ("insert", {"id": 3, "mode": "a", "setpoint": "hot"}),
        ("insert", {"id": 4, "mode": "b", "setpoint": 4.0}),
        ("insert", {"id": 5, "mode": "c", "setpoint": 500.0}),
        ("insert", {"id": 6, "mode": "d", "setpoint": 6.0}))))
    assert (out.status, out.rows) == (OutcomeStatus.MATERIALIZED, 2)
    assert {3, 5}.isdisjoint(await mirror(pool, s.lineage_id))
    base = tenant.url(f"/edge/lineages/{s.lineage_id}/quarantine")

    r = await client.get(base, headers=tenant.reader())
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["meta"]["total"] == 2
    by_id = {q["row"]["pk"]["id"]: q for q in doc["data"]}
    hot, capped = by_id[3], by_id[5]
    assert (hot["reason_code"], hot["reason_field"], hot["status"]) == (
        "value_type_mismatch", "rows[0].row.setpoint", "open")
    assert capped["reason_code"] == "23514" and "cap" in capped["reason"]
    assert capped["row"] == {"commit_seq": capped["commit_seq"], "op": "insert",
                             "pk": {"id": 5}, "row": {"id": 5, "mode": "c", "setpoint": 500.0}}
    r = await client.get(f"{base}/{hot['id']}", headers=tenant.reader())
    assert r.status_code == 200 and r.json()["data"]["row"]["row"]["setpoint"] == "hot"

    # Edit and retry: written through the writer, the row resolved.
    r = await client.post(f"{base}/{hot['id']}/retry", headers=tenant.reader(**idem()),
                          json={"values": {"setpoint": 21.5}})
    assert r.status_code == 403
    r = await client.post(f"{base}/{hot['id']}/retry", headers=tenant.headers(**idem()),
                          json={"values": {"setpoint": 21.5}})
    assert r.status_code == 200, r.text
    assert r.json()["data"] == {"id": hot["id"], "status": "retried", "written": True,
                                "reason_code": None, "reason": None}
    assert (await mirror(pool, s.lineage_id))[3] == 21.5
    r = await client.post(f"{base}/{hot['id']}/retry", headers=tenant.headers(**idem()))
    assert r.status_code == 409  # only open rows are retried
    r = await client.post(f"{base}/{capped['id']}/retry", headers=tenant.headers(**idem()),
                          json={"values": {"id": 9}})
    assert r.status_code == 422 and r.json()["error"]["field"] == "values.id"

    # Unedited, still refused: stays open with the attempt counted.
    r = await client.post(f"{base}/{capped['id']}/retry", headers=tenant.headers(**idem()))
    assert r.status_code == 200, r.text
    assert (r.json()["data"]["written"], r.json()["data"]["reason_code"]) == (False, "23514")

    # A newer change of the key from the device supersedes the quarantined one.
    await pipe.handle(topic, f.payload(f.rows(("update", {"id": 5, "mode": "c",
                                                          "setpoint": 50.0}))))
    r = await client.get(base, headers=tenant.reader(), params={"status": "superseded"})
    assert [q["id"] for q in r.json()["data"]] == [capped["id"]]
    assert (await mirror(pool, s.lineage_id))[5] == 50.0

    # Fixed at the cause, retry all drains what is open.
    await pipe.handle(topic, f.payload(f.rows(("insert", {"id": 7, "mode": "e",
                                                          "setpoint": 700.0}))))
    await pool.execute(f"ALTER TABLE {quote_ident(table)} DROP CONSTRAINT cap")
    r = await client.post(f"{base}/retry", headers=tenant.headers(**idem()))
    assert r.status_code == 200, r.text
    assert {k: r.json()["data"][k] for k in ("retried", "failed", "superseded")} == {
        "retried": 1, "failed": 0, "superseded": 0}
    assert (await mirror(pool, s.lineage_id))[7] == 700.0
    detail = (await client.get(tenant.url(f"/edge/lineages/{s.lineage_id}"),
                               headers=tenant.reader())).json()["data"]
    assert detail["materialization"]["quarantined_rows"] == 0
    assert detail["materialization_errors"] == 0 and detail["status"] == "active"

    # Discard one, then all.
    r = await client.post(f"{base}/{capped['id']}/discard", headers=tenant.headers(**idem()))
    assert r.json()["data"]["discarded_rows"] == 1
    r = await client.post(f"{base}/999999999/discard", headers=tenant.headers(**idem()))
    assert r.status_code == 404
    r = await client.post(f"{base}/discard", headers=tenant.headers(**idem()))
    assert r.json()["data"]["discarded_rows"] == 2
    assert (await client.get(base, headers=tenant.reader())).json()["meta"]["total"] == 0


async def test_cli_lists_edits_retries_and_discards(run, tenant, stage, pool: asyncpg.Pool,
                                                    batches) -> None:
    s, f, pipe = await live(pool, stage, tenant, batches)
    out = await pipe.handle(f"{s.device.root_topic}/sync/rows/batch", f.payload(f.rows(
        ("insert", {"id": 3, "mode": "a", "setpoint": "hot"}),
        ("insert", {"id": 4, "mode": "b", "setpoint": "cold"}))))
    assert (out.status, out.rows) == (OutcomeStatus.MATERIALIZED, 0)
    lid = str(s.lineage_id)
    listed = run.json("lineages", "quarantine", "list", lid)
    assert [q["reason_code"] for q in listed["data"]] == ["value_type_mismatch"] * 2
    first, second = (str(q["id"]) for q in listed["data"])
    _, text, _ = run("lineages", "quarantine", "list", lid)
    assert "value_type_mismatch" in text
    _, text, _ = run("lineages", "quarantine", "show", lid, first)
    assert '"setpoint": "hot"' in text
    _, text, _ = run("lineages", "quarantine", "retry", lid, first, "--set", "setpoint=19.5")
    assert "row written" in text
    assert (await mirror(pool, s.lineage_id))[3] == 19.5
    code, _, err = run("lineages", "quarantine", "discard", lid, ok=False)
    assert code == 2 and "--all" in err
    _, text, _ = run("lineages", "quarantine", "discard", lid, second, "--yes")
    assert "discarded_rows" in text
    assert run.json("lineages", "quarantine", "list", lid, "--status", "open")["data"] == []


async def test_search_every_page(client: httpx.AsyncClient, tenant, stage,
                                 pool: asyncpg.Pool, batches) -> None:
    """``q`` filters quarantined rows on the server (reason code, reason, field, op, the
    row as sent), any case, so a search reaches every page; ``%`` and ``_`` in values are
    themselves, not wildcards."""
    s, f, pipe = await live(pool, stage, tenant, batches)
    out = await pipe.handle(f"{s.device.root_topic}/sync/rows/batch", f.payload(f.rows(
        ("insert", {"id": 3, "mode": "50%", "setpoint": "hot"}),
        ("insert", {"id": 4, "mode": "50x", "setpoint": "cold"}),
        ("insert", {"id": 5, "mode": "eco_plus", "setpoint": "warm"}),
        ("insert", {"id": 6, "mode": "ecoXplus", "setpoint": "cool"}),
        ("insert", {"id": 7, "mode": "fine", "setpoint": 7.0}))))
    assert (out.status, out.rows) == (OutcomeStatus.MATERIALIZED, 1)
    base = tenant.url(f"/edge/lineages/{s.lineage_id}/quarantine")

    async def ids(**params: str | int) -> tuple[list[int], int]:
        r = await client.get(base, headers=tenant.reader(), params=params)
        assert r.status_code == 200, r.text
        return [q["row"]["pk"]["id"] for q in r.json()["data"]], r.json()["meta"]["total"]

    assert await ids(q="VALUE_TYPE_MISMATCH") == ([3, 4, 5, 6], 4)
    assert await ids(q="value_type", page=2, limit=3) == ([6], 4)
    assert await ids(q="rows[0].row.SETPOINT") == ([3, 4, 5, 6], 4)  # the field
    assert await ids(q="EXPECTS DOUBLE") == ([3, 4, 5, 6], 4)  # the reason
    assert await ids(q="%") == ([3], 1)  # "%" is not "anything"
    assert await ids(q="co_plus") == ([5], 1)  # "_" is not any character
    assert await ids(q='"COLD"') == ([4], 1)  # a value, as the row was sent
    assert await ids(q="insert") == ([3, 4, 5, 6], 4)  # the op
    assert await ids(q="eco", status="open") == ([5, 6], 2)
    assert await ids(q="eco", status="retried") == ([], 0)
    assert await ids(q="fine") == ([], 0)  # written, never quarantined
    for bad in ("x" * 201, "eco\x00"):  # too long; a NUL PostgreSQL cannot hold
        r = await client.get(base, headers=tenant.reader(), params={"q": bad})
        assert r.status_code == 422 and r.json()["error"]["field"] == "q", r.text
    assert "NUL" in r.json()["error"]["message"]
