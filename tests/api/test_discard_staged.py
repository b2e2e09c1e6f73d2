"""Discarding staged rows (all, by staging reason, by schema version) with a count, and
rows of a rejected schema version labelled ``schema_rejected`` rather than left waiting
for a review that will never come."""

from __future__ import annotations

import typing
import uuid

import asyncpg
import httpx

from edgesync.api._lineage_models import DiscardBody
from edgesync.ingest import IngestPipeline
from edgesync.staging import STAGING_REASONS


def idem() -> dict[str, str]:
    return {"Idempotency-Key": str(uuid.uuid4())}


async def staged(pool: asyncpg.Pool, lineage_id: uuid.UUID) -> list[tuple[str, str, int]]:
    rows = await pool.fetch("SELECT staging_reason, schema_hash, row_count FROM "
                            "edge_staged_rows WHERE lineage_id = $1 ORDER BY id", lineage_id)
    return [tuple(r) for r in rows]


async def test_reject_labels_then_discard_by_version_reason_and_all(
        client: httpx.AsyncClient, tenant, stage, pool: asyncpg.Pool, batches) -> None:
    s = await stage(tenant)  # 2 rows staged under review of the first version
    first_hash = (await staged(pool, s.lineage_id))[0][1]
    url = tenant.url(f"/edge/schema-reviews/{s.review_id}")
    r = await client.post(url + "/reject", headers=tenant.headers(**idem()),
                          json={"action_version": 1, "reason": "wrong table"})
    assert r.status_code == 200, r.text
    assert await staged(pool, s.lineage_id) == [("schema_rejected", first_hash, 2)]
    # More of the rejected version arriving: staged with the same label.
    f = batches()
    pipe = IngestPipeline(pool)
    out = await pipe.handle(f"{s.device.root_topic}/sync/rows/batch", f.payload(
        f.rows(("insert", {"id": 3, "mode": "x", "setpoint": 1.0}))))
    assert out.code == "schema_rejected"
    # A newer version goes under review.
    f.set_columns([("id", "INTEGER", 1, True), ("mode", "TEXT", 0, True),
                   ("setpoint", "REAL", 0, False), ("fan", "INTEGER", 0, False)])
    out = await pipe.handle(f"{s.device.root_topic}/sync/rows/batch", f.payload(
        f.rows(("insert", {"id": 4, "mode": "y", "setpoint": 2.0, "fan": 1}),
               ("insert", {"id": 5, "mode": "z", "setpoint": 3.0, "fan": 0}))))
    assert out.code == "schema_review"
    assert [(r, n) for r, _, n in await staged(pool, s.lineage_id)] == [
        ("schema_rejected", 2), ("schema_rejected", 1), ("schema_review", 2)]

    discard = tenant.url(f"/edge/lineages/{s.lineage_id}/discard-staged")
    r = await client.post(discard, headers=tenant.headers(**idem()),
                          json={"schema_hash": first_hash})
    assert r.status_code == 200, r.text
    assert r.json()["data"] == {"lineage_id": str(s.lineage_id), "discarded_batches": 2,
                                "discarded_rows": 3}
    lineage = await pool.fetchrow("SELECT staged_rows, staged_bytes FROM edge_table_lineages "
                                  "WHERE id = $1", s.lineage_id)
    assert lineage["staged_rows"] == 2 and lineage["staged_bytes"] > 0
    r = await client.post(discard, headers=tenant.headers(**idem()),
                          json={"staging_reason": "materialization_failed"})
    assert r.json()["data"]["discarded_batches"] == 0
    r = await client.post(discard, headers=tenant.headers(**idem()), json={})
    assert (r.json()["data"]["discarded_batches"], r.json()["data"]["discarded_rows"]) == (1, 2)
    lineage = await pool.fetchrow("SELECT staged_rows, staged_bytes FROM edge_table_lineages "
                                  "WHERE id = $1", s.lineage_id)
    assert (lineage["staged_rows"], lineage["staged_bytes"]) == (0, 0)
    assert await pool.fetchval("SELECT body FROM edge_events WHERE subject_id = $1 AND "
                               "event_type = 'edgesync.staged_rows.discarded.v1' "
                               "ORDER BY id LIMIT 1", s.lineage_id) == {
        "lineage_id": str(s.lineage_id), "actor": "admin", "staging_reason": None,
        "schema_hash": first_hash, "batches": 2, "rows": 3}


async def test_discard_refuses_bad_filters_and_unknown_lineages(
        client: httpx.AsyncClient, tenant, stage) -> None:
    s = await stage(tenant)
    discard = tenant.url(f"/edge/lineages/{s.lineage_id}/discard-staged")
    for body, field in (({"staging_reason": "bored"}, "staging_reason"),
                        ({"schema_hash": "ABC"}, "schema_hash"), ({"all": True}, "all")):
        r = await client.post(discard, headers=tenant.headers(**idem()), json=body)
        assert r.status_code == 422, r.text
        assert r.json()["error"]["field"] == field
    r = await client.post(tenant.url(f"/edge/lineages/{uuid.uuid4()}/discard-staged"),
                          headers=tenant.headers(**idem()), json={})
    assert (r.status_code, r.json()["error"]["code"]) == (404, "LINEAGE_NOT_FOUND")
    r = await client.post(discard, headers=tenant.reader(), json={})
    assert r.status_code == 403


def test_the_api_names_every_staging_reason() -> None:
    hint = typing.get_type_hints(DiscardBody)["staging_reason"]
    literal = next(a for a in typing.get_args(hint) if a is not type(None))
    assert typing.get_args(literal) == STAGING_REASONS


async def test_discard_through_the_cli(run, tenant, stage, pool: asyncpg.Pool,
                                       monkeypatch) -> None:
    import io

    s = await stage(tenant)
    lid = str(s.lineage_id)
    monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))
    code, _, err = run("lineages", "discard-staged", lid, "--reason", "schema_review", ok=False)
    assert code == 1 and "[y/N]" in err and "reason schema_review" in err
    assert len(await staged(pool, s.lineage_id)) == 1
    got = run.json("lineages", "discard-staged", lid, "--reason", "schema_review", "--yes")
    assert got["data"] == {"lineage_id": lid, "discarded_batches": 1, "discarded_rows": 2}
    assert await staged(pool, s.lineage_id) == []
    code, _, err = run("lineages", "discard-staged", lid, "--schema-hash", "xyz", "--yes",
                       ok=False)
    assert code == 2 and "schema_hash" in err


def test_the_cli_offers_every_staging_reason() -> None:
    from edgesync.cli._options import STAGING_REASONS as CLI_REASONS

    assert CLI_REASONS == STAGING_REASONS
