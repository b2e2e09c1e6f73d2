"""Rows of a rejected schema version are never silently left: when they fit the approved
version (same key, every column an approved column of the same affinity) an operator
replays them under its bindings, with a count — later batches of that version then flow
too — and the others are reported with why, to be discarded (docs/recovery.md)."""

from __future__ import annotations

import uuid

import asyncpg
import httpx
from kits.review_helpers import approve

from edgesync.governance import replay_incompatibilities
from edgesync.ingest import IngestPipeline, Replayer
from edgesync.materialize import quote_ident

V1 = [("id", "INTEGER", 1, True), ("mode", "TEXT", 0, True), ("setpoint", "REAL", 0, False)]
V2 = [*V1, ("fan", "INTEGER", 0, False)]  # approved: v1's columns and one more
BAD = [("id", "INTEGER", 1, True), ("mode", "INTEGER", 0, True)]  # mode changed affinity


def idem() -> dict[str, str]:
    return {"Idempotency-Key": str(uuid.uuid4())}


def cols(spec: list[tuple[str, str, int, bool]]) -> list[dict[str, object]]:
    affinity = {"INTEGER": "INTEGER", "TEXT": "TEXT", "REAL": "REAL"}
    return [{"name": n, "decl_type_affinity": affinity[t], "pk_ordinal": pk, "not_null": nn}
            for n, t, pk, nn in spec]


def test_the_compatibility_rule() -> None:
    assert replay_incompatibilities(cols(V2), cols(V1)) == []
    # Only NOT NULL flags differ: still compatible (cloud columns are nullable).
    assert replay_incompatibilities(cols(V1), cols([(n, t, pk, not nn)
                                                    for n, t, pk, nn in V1])) == []
    assert replay_incompatibilities(cols(V1), cols(V2)) == [
        "columns the approved version does not have (their values would be lost): fan"]
    assert replay_incompatibilities(cols(V1), cols(BAD)) == ["type affinity differs: mode"]
    rekeyed = [("id", "INTEGER", 1, True), ("mode", "TEXT", 2, True),
               ("setpoint", "REAL", 0, False)]
    assert replay_incompatibilities(cols(V1), cols(rekeyed)) == [
        "primary key differs: (id, mode) instead of (id)"]
    assert replay_incompatibilities(cols(V1), None) == [
        "the rejected version's columns are unknown (no batch carried them)"]


async def test_rejected_rows_replay_under_the_approved_version(
        client: httpx.AsyncClient, tenant, stage, pool: asyncpg.Pool, batches) -> None:
    s = await stage(tenant)  # v1: rows 1 and 2, under review
    topic = f"{s.device.root_topic}/sync/rows/batch"
    pipe = IngestPipeline(pool)
    url = tenant.url(f"/edge/lineages/{s.lineage_id}/replay-rejected")

    # Nothing approved yet: nothing to replay under.
    r = await client.post(url, headers=tenant.headers(**idem()), json={})
    assert (r.status_code, r.json()["error"]["code"]) == (409, "CONFLICT"), r.text

    r = await client.post(tenant.url(f"/edge/schema-reviews/{s.review_id}/reject"),
                          headers=tenant.headers(**idem()),
                          json={"action_version": 1, "reason": "not yet"})
    assert r.status_code == 200, r.text
    f = batches()
    f.set_columns(BAD)
    assert (await pipe.handle(topic, f.payload(f.rows(("insert", {"id": 7, "mode": 1}))))
            ).code == "schema_review"
    bad_review = await pool.fetchval(
        "SELECT id FROM edge_schema_reviews WHERE lineage_id = $1 AND status = 'queued'",
        s.lineage_id)
    r = await client.post(tenant.url(f"/edge/schema-reviews/{bad_review}/reject"),
                          headers=tenant.headers(**idem()), json={"action_version": 1})
    assert r.status_code == 200, r.text
    f.set_columns(V2)
    await pipe.handle(topic, f.payload(f.rows(
        ("insert", {"id": 3, "mode": "fan", "setpoint": 19.0, "fan": 2}))))
    await approve(pool, s.lineage_id)
    await Replayer(pool).drain_pending()
    lineage = await pool.fetchrow("SELECT * FROM edge_table_lineages WHERE id = $1",
                                  s.lineage_id)
    hashes = {h: v for h, v in await pool.fetch(
        "SELECT schema_hash, status FROM edge_schema_versions WHERE lineage_id = $1",
        s.lineage_id)}
    f1, fbad = batches(), batches()
    fbad.set_columns(BAD)
    v1_hash, bad_hash = f1.schema_hash, fbad.schema_hash
    assert hashes == {v1_hash: "rejected", bad_hash: "rejected",
                      lineage["approved_schema_hash"]: "approved"}
    assert lineage["staged_rows"] == 3  # v1's two rows, BAD's one

    # A dry run says which fit, and changes nothing.
    r = await client.post(url, headers=tenant.headers(**idem()), json={"dry_run": True})
    assert r.status_code == 200, r.text
    got = r.json()["data"]
    assert (got["dry_run"], got["rebound_batches"], got["rebound_rows"]) == (True, 0, 0)
    assert [(v["schema_hash"], v["compatible"], v["reasons"], v["staged_rows"], v["rebound"])
            for v in got["versions"]] == [
        (v1_hash, True, [], 2, False),
        (bad_hash, False, ["type affinity differs: mode"], 1, False)]
    # Naming the incompatible one: a conflict saying why, and what to do instead.
    r = await client.post(url, headers=tenant.headers(**idem()), json={"schema_hash": bad_hash})
    assert r.status_code == 409 and "discard-staged" in r.json()["error"]["message"]

    r = await client.post(url, headers=tenant.headers(**idem()), json={})
    assert r.status_code == 200, r.text
    got = r.json()["data"]
    assert (got["rebound_batches"], got["rebound_rows"]) == (1, 2)
    assert [v["rebound"] for v in got["versions"]] == [True, False]
    assert await Replayer(pool).drain_pending() == 2
    table = quote_ident(lineage["target_table"])
    mirror = await pool.fetch(f"SELECT id, mode, setpoint, fan FROM {table} "
                              "WHERE device_id = $1 ORDER BY id", s.device.device_id)
    assert [tuple(m) for m in mirror] == [(1, "heat", 20.5, None), (2, "cool", None, None),
                                          (3, "fan", 19.0, 2)]
    assert await pool.fetch("SELECT schema_hash FROM edge_staged_rows WHERE lineage_id = $1",
                            s.lineage_id) == [(bad_hash,)]

    # A later batch of the rebound version is written at once, with the same bindings.
    out = await pipe.handle(topic, f1.payload(f1.rows(
        ("update", {"id": 9, "mode": "late", "setpoint": 1.5}))))
    assert out.status == "materialized", out
    assert await pool.fetchval(f"SELECT mode FROM {table} WHERE id = 9") == "late"
    event = await pool.fetchval(
        "SELECT body FROM edge_events WHERE subject_id = $1 "
        "AND event_type = 'edgesync.rejected_rows.rebound.v1'", s.lineage_id)
    assert event == {"lineage_id": str(s.lineage_id), "actor": "admin",
                     "approved_schema_hash": lineage["approved_schema_hash"],
                     "schema_hashes": [v1_hash], "batches": 1, "rows": 2}


async def test_replay_rejected_through_the_cli(run, tenant, stage, pool: asyncpg.Pool,
                                               batches) -> None:
    s = await stage(tenant)
    lid = str(s.lineage_id)
    run.json("reviews", "reject", str(s.review_id), "--reason", "later")
    f = batches()
    f.set_columns(V2)
    await IngestPipeline(pool).handle(f"{s.device.root_topic}/sync/rows/batch", f.payload(
        f.rows(("insert", {"id": 3, "mode": "fan", "setpoint": 19.0, "fan": 2}))))
    await approve(pool, s.lineage_id)
    _, out, _ = run("lineages", "replay-rejected", lid, "--dry-run")
    assert "rejected versions" in out and "dry_run:              yes" in out, out
    assert "COMPATIBLE  REPLAYED" in out and "  yes         no        1        2" in out, out
    got = run.json("lineages", "replay-rejected", lid)
    assert (got["data"]["rebound_batches"], got["data"]["rebound_rows"]) == (1, 2)
    code, _, err = run("lineages", "replay-rejected", lid, "--schema-hash", "f" * 64,
                       ok=False)
    assert code != 0 and "no rejected schema version" in err, err


async def test_a_refused_row_of_a_rebound_version_retries_with_the_approved_bindings(
        client: httpx.AsyncClient, tenant, stage, pool: asyncpg.Pool, batches) -> None:
    """A row of a rebound batch the writer refuses is quarantined under its own (rejected)
    version; its retry writes it with the approved version's bindings, not a 409."""
    s = await stage(tenant)
    topic = f"{s.device.root_topic}/sync/rows/batch"
    pipe = IngestPipeline(pool)
    r = await client.post(tenant.url(f"/edge/schema-reviews/{s.review_id}/reject"),
                          headers=tenant.headers(**idem()), json={"action_version": 1})
    assert r.status_code == 200, r.text
    f1 = batches()
    await pipe.handle(topic, f1.payload(f1.rows(
        ("insert", {"id": 4, "mode": "odd", "setpoint": "not a number"}))))
    f2 = batches()
    f2.set_columns(V2)
    await pipe.handle(topic, f2.payload(f2.rows(
        ("insert", {"id": 3, "mode": "fan", "setpoint": 19.0, "fan": 2}))))
    await approve(pool, s.lineage_id)
    r = await client.post(tenant.url(f"/edge/lineages/{s.lineage_id}/replay-rejected"),
                          headers=tenant.headers(**idem()), json={})
    assert r.json()["data"]["rebound_rows"] == 3, r.text
    await Replayer(pool).drain_pending()
    (q,) = await pool.fetch("SELECT id, schema_hash, reason_code FROM edge_quarantined_rows "
                            "WHERE lineage_id = $1 AND status = 'open'", s.lineage_id)
    assert (q["schema_hash"], q["reason_code"]) == (f1.schema_hash, "value_type_mismatch")
    r = await client.post(tenant.url(f"/edge/lineages/{s.lineage_id}/quarantine/{q['id']}"
                                     "/retry"), headers=tenant.headers(**idem()),
                          json={"values": {"setpoint": 4.5}})
    assert r.status_code == 200 and r.json()["data"]["written"] is True, r.text
    table = quote_ident(await pool.fetchval(
        "SELECT target_table FROM edge_table_lineages WHERE id = $1", s.lineage_id))
    assert tuple(await pool.fetchrow(f"SELECT mode, setpoint, fan FROM {table} "
                                     "WHERE id = 4")) == ("odd", 4.5, None)
