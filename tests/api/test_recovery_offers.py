"""Recovery offers (docs/recovery.md, "Offered at the right moment") through the HTTP API
and the CLI, the device's reports simulated through the ingest pipeline; with the real
agent: tests/e2e/test_ctl_offers.py.

* A recorded capture gap offers a whole-table re-snapshot — not a filtered one, not
  while one is under way, again when it fails, gone once it completed or a verification
  came back equal, and again for a later gap.
* A lineage re-created after a delete offers a verification once approved, until one
  comes back equal; the DELETE answer says so.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import asyncpg
import httpx
import orjson
from kits.review_helpers import approve

from edgesync import _core
from edgesync.ingest import IngestPipeline, Replayer
from edgesync.protocol import TableDigest, pk_json, uuid7

ROWS = [(1, "heat", 20.5), (2, "cool", None)]


def idem() -> dict[str, str]:
    return {"Idempotency-Key": str(uuid.uuid4())}


async def live(pool: asyncpg.Pool, stage: Any, tenant: Any) -> Any:
    s = await stage(tenant)
    await approve(pool, s.lineage_id)
    await Replayer(pool).drain_pending()
    return s


async def report(pool: asyncpg.Pool, s: Any, doc: dict[str, Any]) -> Any:
    return await IngestPipeline(pool).handle(
        f"{s.device.root_topic}/sync/ingest/request",
        orjson.dumps({"format_version": 1, "source_table": "device_state", **doc}))


def digest(rows: list[tuple[Any, ...]]) -> dict[str, Any]:
    d = TableDigest(2)
    for row in rows:
        d.add(_core.pk_hash(pk_json(["id"], row[:1])), row)
    return {"rows": d.rows, "buckets": d.buckets()}


async def offers(client: httpx.AsyncClient, tenant: Any, lineage_id: Any) -> list[dict[str, Any]]:
    r = await client.get(tenant.url(f"/edge/lineages/{lineage_id}"), headers=tenant.reader())
    assert r.status_code == 200, r.text
    found: list[dict[str, Any]] = r.json()["data"]["recovery_offers"]
    return found


async def gap(pool: asyncpg.Pool, s: Any, first: int, last: int) -> asyncpg.Record:
    out = await report(pool, s, {"request_kind": "gap_report", "journal_epoch": uuid7(),
                                 "first_commit_seq": first, "last_commit_seq": last})
    assert out.lineage_id == s.lineage_id, out
    rec = await pool.fetchrow("SELECT id, reported_at FROM edge_capture_gaps WHERE "
                              "lineage_id = $1 ORDER BY id DESC LIMIT 1", s.lineage_id)
    assert rec is not None
    return rec


def ms(rec: asyncpg.Record, column: str) -> int:
    return int(rec[column].timestamp() * 1000)


async def epoch_of(pool: asyncpg.Pool, lineage_id: uuid.UUID) -> str:
    target = await pool.fetchval("SELECT target_table FROM edge_table_lineages WHERE id = $1",
                                 lineage_id)
    return str(await pool.fetchval(f'SELECT max(_edge_journal_epoch::text) FROM "{target}"'))


async def finish_resnapshot(pool: asyncpg.Pool, s: Any, job_id: str, status: str) -> None:
    doc = {"request_kind": "resnapshot_status", "job_id": job_id, "status": status,
           "rows": 2, "chunks": 1, "journal_epoch": await epoch_of(pool, s.lineage_id),
           "first_commit_seq": 1, "last_commit_seq": 2}  # (sweeps nothing)
    if status == "failed":
        doc["error"] = "disk I/O error"
    assert (await report(pool, s, doc)).code is None


async def verified(client: httpx.AsyncClient, pool: asyncpg.Pool, tenant: Any, s: Any,
                   rows: list[tuple[Any, ...]], *, before_report: Any = None) -> str:
    r = await client.post(tenant.url(f"/edge/lineages/{s.lineage_id}/verify"),
                          headers=tenant.headers(**idem()), json={})
    assert r.status_code == 202, r.text
    job = r.json()["data"]
    if before_report is not None:
        await before_report()
    await report(pool, s, {"request_kind": "verify_digest", "job_id": job["id"],
                           "digest_version": 1, "journal_epoch": await epoch_of(pool,
                                                                                s.lineage_id),
                           "as_of_commit_seq": 2, **digest(rows)})
    status = await pool.fetchval("SELECT status FROM edge_verifications WHERE id = $1",
                                 uuid.UUID(job["id"]))
    return str(status)


async def test_a_capture_gap_offers_a_resnapshot_until_one_completes(
        client: httpx.AsyncClient, tenant, stage, pool: asyncpg.Pool) -> None:
    s = await stage(tenant)
    await gap(pool, s, 3, 9)
    assert await offers(client, tenant, s.lineage_id) == []  # under review: nothing to take
    await approve(pool, s.lineage_id)
    await Replayer(pool).drain_pending()
    first = await pool.fetchrow("SELECT id, reported_at FROM edge_capture_gaps WHERE "
                                "lineage_id = $1", s.lineage_id)
    assert first is not None
    second = await gap(pool, s, 10, 99)
    [offer] = await offers(client, tenant, s.lineage_id)
    assert {k: offer[k] for k in ("action", "reason", "gap_id", "since_ms")} == {
        "action": "resnapshot", "reason": "capture_gap", "gap_id": first["id"],
        "since_ms": ms(first, "reported_at")}
    assert "dropped 2 ranges" in offer["detail"] and "3..9" in offer["detail"]

    base = tenant.url(f"/edge/lineages/{s.lineage_id}")
    r = await client.post(f"{base}/resnapshot", headers=tenant.headers(**idem()),
                          json={"filter": {"buckets": {"prefix": 1, "values": ["a"]}}})
    assert r.status_code == 202, r.text
    await finish_resnapshot(pool, s, r.json()["data"]["id"], "completed")
    assert [o["gap_id"] for o in await offers(client, tenant, s.lineage_id)] == [first["id"]]

    # Taken as offered (the whole table): withheld while it runs, back when it fails.
    r = await client.post(f"{base}/resnapshot", headers=tenant.headers(**idem()))
    assert r.status_code == 202, r.text
    job = r.json()["data"]["id"]
    assert await offers(client, tenant, s.lineage_id) == []
    await finish_resnapshot(pool, s, job, "failed")
    assert [o["action"] for o in await offers(client, tenant, s.lineage_id)] == ["resnapshot"]
    r = await client.post(f"{base}/resnapshot", headers=tenant.headers(**idem()), json={})
    await finish_resnapshot(pool, s, r.json()["data"]["id"], "completed")
    assert await offers(client, tenant, s.lineage_id) == []

    # A later gap: offered again, with that gap; a verification that came back equal
    # repairs it too, one that came back different does not.
    third = await gap(pool, s, 120, 130)
    [offer] = await offers(client, tenant, s.lineage_id)
    assert (offer["gap_id"], offer["since_ms"]) == (third["id"], ms(third, "reported_at"))
    assert "dropped commit_seq 120..130" in offer["detail"]
    assert third["id"] != second["id"]

    async def withheld_while_verifying() -> None:
        assert await offers(client, tenant, s.lineage_id) == []

    assert await verified(client, pool, tenant, s, [(1, "heat", 99.0), ROWS[1]],
                          before_report=withheld_while_verifying) == "different"
    assert [o["gap_id"] for o in await offers(client, tenant, s.lineage_id)] == [third["id"]]
    assert await verified(client, pool, tenant, s, ROWS) == "equal"
    assert await offers(client, tenant, s.lineage_id) == []


async def test_a_lineage_recreated_after_a_delete_offers_a_verification(
        client: httpx.AsyncClient, tenant, stage, pool: asyncpg.Pool,
        batches: Any) -> None:
    s = await live(pool, stage, tenant)
    assert await offers(client, tenant, s.lineage_id) == []
    r = await client.delete(tenant.url(f"/edge/lineages/{s.lineage_id}"),
                            headers=tenant.headers(**idem()))
    assert r.status_code == 200, r.text
    deleted = r.json()["data"]
    forget = await pool.fetchval("SELECT id FROM edge_pending_controls WHERE device_id = $1 "
                                 "AND control_kind = 'forget_lineage'", s.device.device_id)
    assert {k: v for k, v in deleted.items() if k not in ("detail", "next_step")} == {
        "id": str(s.lineage_id), "deleted": True, "device_id": str(s.device.device_id),
        "source_table": "device_state", "forget_control_id": str(forget),
        "device_will": "resend_table"}
    assert (deleted["next_step"]["action"], deleted["next_step"]["reason"]) == (
        "verify", "recreated_after_delete")
    assert "verify" in deleted["next_step"]["detail"]
    assert "every current row again" in deleted["detail"]

    # The device starts the table over: its next batch re-creates the lineage.
    f = batches("device_state")
    out = await IngestPipeline(pool).handle(
        f"{s.device.root_topic}/sync/rows/batch",
        f.payload(f.rows(("insert", {"id": 1, "mode": "heat", "setpoint": 20.5}),
                         ("insert", {"id": 2, "mode": "cool", "setpoint": None}))))
    assert out.lineage_id not in (None, s.lineage_id)
    new = dataclasses.replace(s, lineage_id=out.lineage_id)
    assert await offers(client, tenant, new.lineage_id) == []  # not approved yet
    await approve(pool, new.lineage_id)
    await Replayer(pool).drain_pending()
    created = await pool.fetchrow("SELECT created_at FROM edge_table_lineages WHERE id = $1",
                                  new.lineage_id)
    assert created is not None
    [offer] = await offers(client, tenant, new.lineage_id)
    assert offer == {"action": "verify", "reason": "recreated_after_delete",
                     "since_ms": ms(created, "created_at"), "gap_id": None,
                     "detail": offer["detail"]}
    assert "re-created after a delete" in offer["detail"]

    # Another table of the device was never deleted: nothing offered there.
    other = batches("other_table")
    out = await IngestPipeline(pool).handle(
        f"{s.device.root_topic}/sync/rows/batch",
        other.payload(other.rows(("insert", {"id": 1, "mode": "x", "setpoint": 1.0}))))
    await approve(pool, out.lineage_id)
    assert await offers(client, tenant, out.lineage_id) == []

    assert await verified(client, pool, tenant, new, [(1, "heat", 1.0), ROWS[1]]) \
        == "different"
    [offer] = await offers(client, tenant, new.lineage_id)
    assert offer["action"] == "verify" and "repair" in offer["detail"]
    assert await verified(client, pool, tenant, new, ROWS) == "equal"
    assert await offers(client, tenant, new.lineage_id) == []


async def test_cli_show_prints_the_offer_and_its_command_and_delete_the_next_step(
        run, tenant, stage, pool: asyncpg.Pool) -> None:
    s = await live(pool, stage, tenant)
    lid = str(s.lineage_id)
    _, text, _ = run("lineages", "show", lid)
    assert "recovery offered" not in text
    await gap(pool, s, 10, 99)
    gap_id = await pool.fetchval("SELECT id FROM edge_capture_gaps WHERE lineage_id = $1",
                                 s.lineage_id)
    _, text, _ = run("lineages", "show", lid)
    assert f"resnapshot (capture_gap, gap {gap_id}, since " in text
    assert f"run: edgesync lineages resnapshot {lid}\n" in text
    assert [o["action"] for o in run.json("lineages", "show", lid)["data"][
        "recovery_offers"]] == ["resnapshot"]
    _, text, _ = run("lineages", "resnapshot", lid)  # the command as printed
    assert "re-snapshot requested" in text
    _, text, _ = run("lineages", "show", lid)
    assert "recovery offered" not in text  # under way

    _, text, _ = run("lineages", "delete", lid, "--yes")
    assert "device_will:       resend_table" in text, text
    assert f"find it: edgesync lineages list --device-id {s.device.device_id}" in text
    assert "then:    edgesync lineages verify NEW_LINEAGE_ID" in text
