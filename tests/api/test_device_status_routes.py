"""GET /devices with presence and the agent's status report, reviews by device, and the
tables a device observed but never sent (GET /edge/observations), over the API and the
CLI. The figures are written the way ``edgesync serve`` writes them: ``Presence``
aggregates in memory and ``flush`` upserts."""

from __future__ import annotations

import time
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import asyncpg
import httpx
import orjson
from kits.api_cli import Cli
from prometheus_client import generate_latest

from edgesync import _core, fleet
from edgesync.ingest import IngestPipeline
from edgesync.observe import Presence
from edgesync.protocol import AgentState, TopicKind, parse_status


def _report(state: AgentState, **figures: object) -> dict[str, object]:
    return {"format_version": 1, "request_kind": "status", "state": state.value, **figures}


async def _device(client: httpx.AsyncClient, tenant, name: str) -> dict[str, object]:
    r = await client.get(tenant.url("/devices"), headers=tenant.reader())
    assert r.status_code == 200, r.text
    return next(d for d in r.json()["data"] if d["name"] == name)


async def test_devices_show_presence_and_the_last_status_report(
        client: httpx.AsyncClient, tenant, pool: asyncpg.Pool, run: Cli) -> None:
    async with pool.acquire() as conn:
        dev = await fleet.add_device(conn, project=tenant.project_name, name="gw-s",
                                     topic_slug=tenant.slug)
    never = await _device(client, tenant, "gw-s")
    assert never["connected"] is False and never["last_seen_at"] is None

    presence = Presence()
    report = parse_status(_report(AgentState.RUNNING, agent_version="1.2.3", journal_depth=7,
                                  oldest_unconfirmed_age_s=1.5, buffer_bytes=4096,
                                  unconfirmed_batches=2, paused_tables=["t"],
                                  report_interval_s=30))
    assert not isinstance(report, str)
    presence.reported(dev.device_id, report)
    await presence.flush(pool)
    up = await _device(client, tenant, "gw-s")
    assert up["connected"] is True and up["agent_state"] == "running"
    assert (up["agent_version"], up["journal_depth"], up["oldest_unconfirmed_age_s"],
            up["buffer_bytes"], up["unconfirmed_batches"], up["paused_tables"]) == (
        "1.2.3", 7, 1.5, 4096, 2, ["t"])
    assert up["last_seen_at"] is not None and up["reported_at"] is not None
    _, out, _ = run("devices", "list")
    header, row = out.splitlines()[:2]
    assert "CONNECTED" in header and "LAST SEEN" in header and "JOURNAL" in header
    assert row.split()[1:6] == ["gw-s", "-", f"{tenant.slug}/gw-s", "yes", up["last_seen_at"]]
    assert row.split()[6:9] == ["1.2.3", "7", "1.5"]

    # A clean stop keeps the figures and ends the connection; so does the broker's will,
    # which says nothing of when the device was last heard from.
    stopped = parse_status(_report(AgentState.STOPPED))
    assert not isinstance(stopped, str)
    presence.reported(dev.device_id, stopped)
    await presence.flush(pool)
    down = await _device(client, tenant, "gw-s")
    assert down["connected"] is False and down["agent_state"] == "stopped"
    assert down["journal_depth"] == 7 and down["last_seen_at"] >= up["last_seen_at"]

    presence.seen(dev.device_id, TopicKind.INGEST_ACK)  # any message: connected again
    await presence.flush(pool)
    again = await _device(client, tenant, "gw-s")
    assert again["connected"] is True and again["last_ack_at"] is not None


async def test_a_status_report_travels_through_the_pipeline(
        client: httpx.AsyncClient, tenant, pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        dev = await fleet.add_device(conn, project=tenant.project_name, name="gw-p",
                                     topic_slug=tenant.slug)
    pipeline = IngestPipeline(pool)
    topic = f"{dev.root_topic}/sync/ingest/request"
    out = await pipeline.handle(topic, orjson.dumps(_report(AgentState.RUNNING,
                                                            journal_depth=3)))
    assert out.status == "materialized" and out.code is None
    bad = await pipeline.handle(topic, orjson.dumps(_report(AgentState.RUNNING,
                                                            journal_depth="many")))
    assert (bad.status, bad.code) == ("rejected", "invalid_status_report")
    assert "journal_depth" in (bad.detail or "")
    worse = await pipeline.handle(topic, orjson.dumps({**_report(AgentState.RUNNING),
                                                       "state": "dancing"}))
    assert (worse.status, worse.code) == ("rejected", "invalid_status_report")
    await pipeline.presence.flush(pool)
    got = await _device(client, tenant, "gw-p")
    assert got["connected"] is True and got["journal_depth"] == 3

    # the MQTT will (the broker speaking for a vanished agent) ends the connection but is
    # no sign of life: last_seen_at stays, the figures stay
    out = await pipeline.handle(topic, orjson.dumps(_report(AgentState.OFFLINE)))
    assert out.status == "materialized"
    await pipeline.presence.flush(pool)
    lost = await _device(client, tenant, "gw-p")
    assert (lost["connected"], lost["agent_state"], lost["journal_depth"]) == (
        False, "offline", 3)
    assert lost["last_seen_at"] == got["last_seen_at"]


async def test_reviews_by_device_and_tables_observed_but_never_sent(
        client: httpx.AsyncClient, tenant, stage, pool: asyncpg.Pool, run: Cli) -> None:
    a = await stage(tenant, name="gw-a")
    b = await stage(tenant, name="gw-b")
    r = await client.get(tenant.url("/edge/schema-reviews"), headers=tenant.reader(),
                         params={"device_id": str(a.device.device_id)})
    assert [x["id"] for x in r.json()["data"]] == [str(a.review_id)]
    assert r.json()["data"][0]["device_name"] == "gw-a"
    r = await client.get(tenant.url("/edge/schema-reviews"), headers=tenant.reader(),
                         params={"device_name": "gw-b"})
    assert [x["id"] for x in r.json()["data"]] == [str(b.review_id)]
    _, out, _ = run("reviews", "list", "--device", "gw-b")
    assert str(b.review_id) in out and str(a.review_id) not in out and "gw-b" in out
    listed = run.json("reviews", "list", "--device", str(a.device.device_id))
    assert [x["id"] for x in listed["data"]] == [str(a.review_id)]

    pipeline = IngestPipeline(pool)
    for table in ("device_state", "never_sent"):
        out = await pipeline.handle(
            f"{a.device.root_topic}/sync/schema/observe",
            orjson.dumps({"format_version": 1, "source_table": table,
                          "schema_hash": "ab" * 32, "observed_at": "2026-01-01T00:00:00Z"}))
        assert out.status == "materialized"
    r = await client.get(tenant.url("/edge/observations"), headers=tenant.reader(),
                         params={"unsent": "true"})
    assert [(o["device_name"], o["source_table"], o["sent"], o["lineage_id"])
            for o in r.json()["data"]] == [("gw-a", "never_sent", False, None)]
    r = await client.get(tenant.url("/edge/observations"), headers=tenant.reader())
    assert [(o["source_table"], o["sent"]) for o in r.json()["data"]] == [
        ("device_state", True), ("never_sent", False)]
    _, out, _ = run("lineages", "observed", "--unsent")
    assert "never_sent" in out and "device_state" not in out


@dataclass
class _Work:  # what the group writer hands Presence.group_committed (ingest's Work)
    scope: Any
    kind: TopicKind
    batch: Any
    outcome: Any


async def test_lineage_freshness_keeps_the_newest_stamped_batch(
        client: httpx.AsyncClient, tenant, stage, pool: asyncpg.Pool) -> None:
    s = await stage(tenant, name="gw-f")
    presence = Presence()
    outcome = SimpleNamespace(status="materialized", lineage_id=s.lineage_id)
    scope = SimpleNamespace(device_id=s.device.device_id)
    seen_ms = int(time.time() * 1000) - 1500
    presence.group_committed([_Work(scope, TopicKind.ROWS_BATCH,
                                    SimpleNamespace(first_seen_at_ms=seen_ms), outcome)])
    await presence.flush(pool)
    r = await client.get(tenant.url("/edge/lineages"), headers=tenant.reader())
    [first] = r.json()["data"]
    assert 1.5 <= first["freshness_seconds"] < 60
    assert first["last_device_seen_at"] is not None and first["last_committed_at"] is not None

    # an unstamped batch (an upload's chunk, another agent) moves only the commit time
    presence.group_committed([_Work(scope, TopicKind.ROWS_BATCH,
                                    SimpleNamespace(first_seen_at_ms=None), outcome)])
    await presence.flush(pool)
    r = await client.get(tenant.url(f"/edge/lineages/{s.lineage_id}"), headers=tenant.reader())
    later = r.json()["data"]
    assert later["last_committed_at"] > first["last_committed_at"]
    assert (later["last_device_seen_at"], later["freshness_seconds"]) == (
        first["last_device_seen_at"], first["freshness_seconds"])
    text = generate_latest(presence.freshness).decode()
    assert 'edgesync_freshness_seconds_count{outcome="materialized",pipeline="rows"} 1.0' in text


async def test_a_devices_batch_bytes_and_compression_through_the_pipeline(
        client: httpx.AsyncClient, tenant, pool: asyncpg.Pool, batches: Any) -> None:
    """Bytes as received and as JSON per device (docs/protocol.md "Compressed batches"):
    one device sending plain JSON, one sending zstd frames of the same batches; a frame
    that does not inflate counts as received. The fleet's totals are on /metrics."""
    async with pool.acquire() as conn:
        plain = await fleet.add_device(conn, project=tenant.project_name, name="gw-plain",
                                       topic_slug=tenant.slug)
        zipped = await fleet.add_device(conn, project=tenant.project_name, name="gw-zstd",
                                        topic_slug=tenant.slug)
    pipeline = IngestPipeline(pool)
    f = batches()
    payloads = [f.payload(f.rows(*[("insert", {"id": i, "mode": "auto", "setpoint": i / 4})
                                   for i in range(k * 50, k * 50 + 50)]),
                          with_schema=k == 0) for k in range(3)]
    frames = [_core.compress_blob(p, 3) for p in payloads]
    for p, z in zip(payloads, frames, strict=True):
        await pipeline.handle(f"{plain.root_topic}/sync/rows/batch", p)
        await pipeline.handle(f"{zipped.root_topic}/sync/rows/batch", z)
    bad = await pipeline.handle(f"{zipped.root_topic}/sync/rows/batch", frames[0][:-4])
    assert (bad.status, bad.code) == ("rejected", "malformed_json")
    await pipeline.presence.flush(pool)

    json_bytes = sum(map(len, payloads))
    wire = sum(map(len, frames)) + len(frames[0]) - 4
    got_plain = await _device(client, tenant, "gw-plain")
    got_zipped = await _device(client, tenant, "gw-zstd")
    assert (got_plain["batch_bytes_received"], got_plain["batch_bytes_json"],
            got_plain["compression_ratio"]) == (json_bytes, json_bytes, 1.0)
    assert (got_zipped["batch_bytes_received"], got_zipped["batch_bytes_json"]) == (
        wire, json_bytes)
    assert got_zipped["compression_ratio"] == round(wire / json_bytes, 4) < 0.3

    # Cumulative: the next flush adds to what was written.
    await pipeline.handle(f"{zipped.root_topic}/sync/rows/batch", frames[1])  # a duplicate
    await pipeline.presence.flush(pool)
    again = await _device(client, tenant, "gw-zstd")
    assert again["batch_bytes_received"] == wire + len(frames[1])
    assert again["batch_bytes_json"] == json_bytes + len(payloads[1])

    scraped = generate_latest(pipeline.metrics.registry).decode()
    assert (f'edgesync_ingest_batch_bytes_total{{form="received"}} '
            f'{float(json_bytes + wire + len(frames[1]))}') in scraped
    assert (f'edgesync_ingest_batch_bytes_total{{form="json"}} '
            f'{float(2 * json_bytes + len(payloads[1]))}') in scraped


async def test_wire_figures_of_a_report_are_kept_and_optional(
        client: httpx.AsyncClient, tenant, pool: asyncpg.Pool) -> None:
    """An agent's ``bytes_sent``, ``budget_left_bytes`` and ``backlog_by_table`` (issue 29)
    are stored with the report; a report without them, or with fields the cloud does not
    know, is accepted as before."""
    async with pool.acquire() as conn:
        dev = await fleet.add_device(conn, project=tenant.project_name, name="gw-w",
                                     topic_slug=tenant.slug)
    pipeline = IngestPipeline(pool)
    topic = f"{dev.root_topic}/sync/ingest/request"
    plain = await pipeline.handle(topic, orjson.dumps(_report(AgentState.RUNNING,
                                                              journal_depth=1, shiny=True)))
    assert plain.status == "materialized" and plain.code is None
    out = await pipeline.handle(topic, orjson.dumps(_report(
        AgentState.RUNNING, journal_depth=2, bytes_sent=52311, budget_left_bytes=None,
        backlog_by_table={"readings": 1200})))
    assert out.status == "materialized" and out.code is None
    bad = await pipeline.handle(topic, orjson.dumps(_report(
        AgentState.RUNNING, backlog_by_table={"readings": "lots"})))
    assert (bad.status, bad.code) == ("rejected", "invalid_status_report")
    assert "backlog_by_table" in (bad.detail or "")
    await pipeline.presence.flush(pool)
    stored = await pool.fetchval("SELECT report FROM edge_device_status WHERE device_id = $1",
                                 dev.device_id)
    report = orjson.loads(stored) if isinstance(stored, str | bytes) else stored
    assert (report["bytes_sent"], report["backlog_by_table"]) == (52311, {"readings": 1200})
    assert "budget_left_bytes" not in report and "shiny" not in report
    assert (await _device(client, tenant, "gw-w"))["journal_depth"] == 2
