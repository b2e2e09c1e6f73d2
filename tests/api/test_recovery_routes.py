"""Re-snapshot and verification through the HTTP API and the CLI, the device's reports
simulated through the ingest pipeline (the agent's side: tests/agent/test_resnapshot.py,
end to end: tests/e2e/test_ctl_recovery.py)."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
import httpx
import orjson
from kits.review_helpers import approve

from edgesync import _core
from edgesync.control import VerificationScheduler
from edgesync.control._verify_schedule import POLICY_ACTOR
from edgesync.ingest import IngestPipeline, OutcomeStatus, Replayer
from edgesync.observe._db_metrics import DatabaseCollector
from edgesync.protocol import TableDigest, pk_json, uuid7


def idem() -> dict[str, str]:
    return {"Idempotency-Key": str(uuid.uuid4())}


async def live(pool: asyncpg.Pool, stage: Any, tenant: Any) -> Any:
    s = await stage(tenant)
    await approve(pool, s.lineage_id)
    await Replayer(pool).drain_pending()
    return s


async def control_of(pool: asyncpg.Pool, lineage_id: uuid.UUID, kind: str) -> dict[str, Any]:
    body = await pool.fetchval("SELECT body FROM edge_pending_controls WHERE lineage_id = $1 "
                               "AND control_kind = $2 ORDER BY created_at DESC LIMIT 1",
                               lineage_id, kind)
    assert body is not None
    return dict(body)


async def report(pool: asyncpg.Pool, s: Any, doc: dict[str, Any]) -> Any:
    return await IngestPipeline(pool).handle(
        f"{s.device.root_topic}/sync/ingest/request",
        orjson.dumps({"format_version": 1, "source_table": "device_state", **doc}))


def digest(rows: list[tuple[Any, ...]], prefix: int = 2) -> dict[str, Any]:
    d = TableDigest(prefix)
    for row in rows:
        d.add(_core.pk_hash(pk_json(["id"], row[:1])), row)
    return {"rows": d.rows, "buckets": d.buckets()}


async def test_resnapshot_request_progress_and_bad_filters(
        client: httpx.AsyncClient, tenant, stage, pool: asyncpg.Pool) -> None:
    s = await live(pool, stage, tenant)
    base = tenant.url(f"/edge/lineages/{s.lineage_id}")
    flt = {"where": [{"column": "mode", "op": "in", "value": ["heat", "cool"]},
                     {"column": "setpoint", "op": "not_null"}],
           "key_range": {"from": {"id": 1}, "to": {"id": 100}}}
    r = await client.post(f"{base}/resnapshot", headers=tenant.reader(**idem()),
                          json={"filter": flt})
    assert r.status_code == 403
    r = await client.post(f"{base}/resnapshot", headers=tenant.headers(**idem()),
                          json={"filter": flt})
    assert r.status_code == 202, r.text
    job = r.json()["data"]
    assert (job["status"], job["filter"]) == ("requested", flt)
    ctl = await control_of(pool, s.lineage_id, "resnapshot")
    assert (ctl["job_id"], ctl["filter"], ctl["source_table"]) == (job["id"], flt,
                                                                   "device_state")
    for bad, field in (({"where": [{"column": "nope", "op": "eq", "value": 1}]}, "filter"),
                       ({"where": [{"column": "id", "op": "like", "value": "x"}]},
                        "filter.where[0].op"),
                       ({"where": "id > 1"}, "filter.where"),
                       ({"key_range": {"from": {"mode": "x"}}}, "filter.key_range.from"),
                       ({"buckets": {"prefix": 2, "values": ["a"]}}, "filter.buckets.values")):
        r = await client.post(f"{base}/resnapshot", headers=tenant.headers(**idem()),
                              json={"filter": bad})
        assert r.status_code in (400, 422), r.text
        assert r.json()["error"]["field"] == field, r.text
    epoch = uuid7()
    out = await report(pool, s, {"request_kind": "resnapshot_status", "job_id": job["id"],
                                 "status": "running", "rows": 2, "chunks": 1,
                                 "journal_epoch": epoch, "first_commit_seq": 10,
                                 "last_commit_seq": 11})
    assert out.status is OutcomeStatus.MATERIALIZED, out
    listed = (await client.get(f"{base}/resnapshots", headers=tenant.reader())).json()
    assert [(j["status"], j["rows_sent"], j["chunks"]) for j in listed["data"]] == [
        ("running", 2, 1)]
    out = await report(pool, s, {"request_kind": "resnapshot_status", "job_id": job["id"],
                                 "status": "completed", "rows": 2, "chunks": 1,
                                 "journal_epoch": epoch, "first_commit_seq": 10,
                                 "last_commit_seq": 11})
    done = (await client.get(f"{base}/resnapshots", headers=tenant.reader())).json()["data"][0]
    assert done["status"] == "completed" and done["completed_at"]
    assert done["swept_rows"] is None  # a column filter: nothing swept
    out = await report(pool, s, {"request_kind": "resnapshot_status", "job_id": "x"})
    assert out.status is OutcomeStatus.REJECTED and out.code == "invalid_recovery_report"
    out = await report(pool, s, {"request_kind": ["resnapshot_status"]})  # unhashable
    assert out.code == "unsupported_request_kind"


async def test_verify_equal_then_different_with_repair(
        client: httpx.AsyncClient, tenant, stage, pool: asyncpg.Pool) -> None:
    s = await live(pool, stage, tenant)
    base = tenant.url(f"/edge/lineages/{s.lineage_id}")
    r = await client.post(f"{base}/verify", headers=tenant.headers(**idem()), json={})
    assert r.status_code == 202, r.text
    job = r.json()["data"]
    ctl = await control_of(pool, s.lineage_id, "verify_table")
    assert ctl["columns"] == [{"name": "id"}, {"name": "mode"}, {"name": "setpoint"}]
    assert (ctl["prefix"], ctl["digest_version"]) == (2, 1)
    rows = [(1, "heat", 20.5), (2, "cool", None)]
    target = await pool.fetchval("SELECT target_table FROM edge_table_lineages WHERE id = $1",
                                 s.lineage_id)
    epoch = str(await pool.fetchval(f'SELECT max(_edge_journal_epoch::text) FROM "{target}"'))
    out = await report(pool, s, {"request_kind": "verify_digest", "job_id": job["id"],
                                 "digest_version": 1, "journal_epoch": epoch,
                                 "as_of_commit_seq": 2, **digest(rows)})
    assert out.status is OutcomeStatus.MATERIALIZED, out
    first = (await client.get(f"{base}/verifications", headers=tenant.reader())).json()
    assert [(v["status"], v["device_rows"], v["cloud_rows"]) for v in first["data"]] == [
        ("equal", 2, 2)]

    r = await client.post(f"{base}/verify", headers=tenant.headers(**idem()),
                          json={"repair": True, "prefix": 1})
    job = r.json()["data"]
    changed = [(1, "heat", 21.0), (2, "cool", None)]
    await report(pool, s, {"request_kind": "verify_digest", "job_id": job["id"],
                           "digest_version": 1, "journal_epoch": epoch,
                           "as_of_commit_seq": 2, **digest(changed, 1)})
    second = (await client.get(f"{base}/verifications", headers=tenant.reader())).json()
    v = second["data"][0]
    bucket = _core.pk_hash(pk_json(["id"], [1]))[:1]
    assert (v["status"], v["differing_buckets"]) == ("different", [bucket])
    repair = (await client.get(f"{base}/resnapshots", headers=tenant.reader())).json()["data"]
    assert [(j["id"], j["filter"]) for j in repair] == [
        (v["resnapshot_id"], {"buckets": {"prefix": 1, "values": [bucket]}})]
    events = await pool.fetch("SELECT event_type, body FROM edge_events WHERE subject_id = $1 "
                              "AND event_type LIKE 'edgesync.verification.finished%' "
                              "ORDER BY id", s.lineage_id)
    assert [e["body"]["status"] for e in events] == ["equal", "different"]
    collector = DatabaseCollector(lambda: pool)
    await collector.refresh()
    samples = {(m.name, tuple(sm.labels.items())): sm.value for m in collector.collect()
               for sm in m.samples}
    # (the database is shared by the suite: at least this lineage's results)
    assert samples[("edgesync_verifications", (("status", "different"),))] >= 1
    assert samples[("edgesync_lineages_verified_different", ())] >= 1
    assert samples[("edgesync_resnapshots", (("status", "requested"),))] >= 1


async def test_cli_resnapshot_and_verify(run, tenant, stage, pool: asyncpg.Pool) -> None:
    s = await live(pool, stage, tenant)
    lid = str(s.lineage_id)
    _, text, _ = run("lineages", "resnapshot", lid, "--where", "mode:eq:heat",
                     "--from", "id=1", "--bucket", "0a", "--bucket", "FF")
    assert "re-snapshot requested" in text
    job = run.json("lineages", "resnapshots", lid)["data"][0]
    assert job["filter"] == {"where": [{"column": "mode", "op": "eq", "value": "heat"}],
                             "key_range": {"from": {"id": 1}},
                             "buckets": {"prefix": 2, "values": ["0a", "ff"]}}
    code, _, err = run("lineages", "resnapshot", lid, "--where", "mode", ok=False)
    assert code == 2 and "--where" in err
    code, _, err = run("lineages", "resnapshot", lid, "--where", "nope:eq:1", ok=False)
    assert code != 0 and "unknown column" in err
    _, text, _ = run("lineages", "verify", lid, "--repair")
    assert "verification requested" in text
    listed = run.json("lineages", "verifications", lid)["data"]
    assert [(v["status"], v["repair"]) for v in listed] == [("requested", True)]
    _, text, _ = run("lineages", "show", lid)
    assert "last re-snapshot" in text and "last verification" in text
    detail = run.json("lineages", "show", lid)["data"]["recovery"]
    assert (detail["resnapshot"]["id"], detail["verification"]["id"]) == (job["id"],
                                                                          listed[0]["id"])


async def test_periodic_verification_by_policy(client: httpx.AsyncClient, tenant, stage,
                                               pool: asyncpg.Pool) -> None:
    s = await live(pool, stage, tenant)
    scheduler = VerificationScheduler(pool)

    async def jobs() -> list[asyncpg.Record]:
        return await pool.fetch("SELECT * FROM edge_verifications WHERE lineage_id = $1 "
                                "ORDER BY created_at", s.lineage_id)

    await scheduler.sweep()
    assert await jobs() == []  # the policy is off by default
    r = await client.patch(tenant.url("/edge/policy"), headers=tenant.headers(**idem()),
                           json={"verify_interval_seconds": -1})
    assert r.status_code == 422
    r = await client.patch(tenant.url("/edge/policy"), headers=tenant.headers(**idem()),
                           json={"verify_interval_seconds": 3600})
    assert r.json()["data"]["verify_interval_seconds"] == 3600
    await scheduler.sweep()
    [first] = await jobs()
    assert (first["status"], first["requested_by"]) == ("requested", POLICY_ACTOR)
    await scheduler.sweep()
    assert len(await jobs()) == 1  # one open: not again
    await pool.execute("UPDATE edge_verifications SET status = 'equal', created_at = "
                       "created_at - interval '30 minutes' WHERE id = $1", first["id"])
    await scheduler.sweep()
    assert len(await jobs()) == 1  # not due yet
    await pool.execute("UPDATE edge_verifications SET created_at = created_at - interval "
                       "'1 hour' WHERE id = $1", first["id"])
    await scheduler.sweep()
    assert [j["status"] for j in await jobs()] == ["equal", "requested"]


async def test_a_bucket_changed_after_the_digest_is_not_differing_and_bad_digests_fail(
        client: httpx.AsyncClient, tenant, stage, pool: asyncpg.Pool) -> None:
    s = await live(pool, stage, tenant)
    base = tenant.url(f"/edge/lineages/{s.lineage_id}")
    target = await pool.fetchval("SELECT target_table FROM edge_table_lineages WHERE id = $1",
                                 s.lineage_id)
    epoch = str(await pool.fetchval(f'SELECT max(_edge_journal_epoch::text) FROM "{target}"'))

    async def verify(**doc: Any) -> dict[str, Any]:
        r = await client.post(f"{base}/verify", headers=tenant.headers(**idem()), json={})
        job = r.json()["data"]
        await report(pool, s, {"request_kind": "verify_digest", "job_id": job["id"],
                               "digest_version": 1, "journal_epoch": epoch, **doc})
        listed = (await client.get(f"{base}/verifications", headers=tenant.reader())).json()
        return dict(next(v for v in listed["data"] if v["id"] == job["id"]))

    # the device's digest is as of commit_seq 1: row 2 (commit_seq 2) changed after it
    v = await verify(as_of_commit_seq=1, **digest([(1, "heat", 20.5)]))
    bucket = _core.pk_hash(pk_json(["id"], [2]))[:2]
    assert (v["status"], v["differing_buckets"], v["changed_buckets"]) == (
        "equal", [], [bucket])
    v = await verify(as_of_commit_seq=2, rows=1, buckets={"zz\u0000": [1, "0" * 32]})
    assert v["status"] == "failed" and "buckets are" in v["error"]
    v = await verify(as_of_commit_seq=2, error="column(s) ['mode'] are not in table")
    assert (v["status"], v["error"]) == ("failed", "column(s) ['mode'] are not in table")
    await pool.execute(f'ALTER TABLE "{target}" DROP COLUMN mode')  # by hand, behind edgesync
    v = await verify(as_of_commit_seq=2, **digest([(1, "heat", 20.5)]))
    assert v["status"] == "failed" and "UndefinedColumnError" in v["error"]
