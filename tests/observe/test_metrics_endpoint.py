"""``/metrics``: Prometheus text whose database gauges move as batches flow (staging,
pauses, controls, reviews, replay, device last-seen), and, on a running ``edgesync
serve`` fed over MQTT, ingest counters that obey the conservation rule after a run with
duplicates, rejections and an unknown device."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import asyncpg
import httpx
import orjson
from broker.broker_helpers import Mosquitto, free_port
from kits.e2e_kit import cloud, eventually, pool_of
from kits.review_helpers import approve
from metrics_kit import Samples, assert_conserved, conservation, samples_of, total, value

from edgesync import fleet
from edgesync.api import create_app
from edgesync.ingest import IngestPipeline, OutcomeStatus, Replayer
from edgesync.protocol import mqtt_client, parse_broker_url

LIMIT = 30  # hang guard, not a timing assertion


async def scrape(client: httpx.AsyncClient) -> Samples:
    r = await client.get("/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    return samples_of(r.text)


def moved(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


async def test_database_gauges_move_as_batches_flow(pool: asyncpg.Pool, batches: Any,
                                                    unique: str) -> None:
    async with pool.acquire() as conn:
        scope = await fleet.add_device(conn, project=f"m-{unique}", name=f"d-{unique}",
                                       topic_slug=f"m-{unique}")
        await conn.execute("UPDATE edge_projects SET policy = $2 WHERE id = $1",
                           scope.project_id, {"max_pending_rows_per_lineage": 1})
    pipe = IngestPipeline(pool)
    app = create_app(pool, metrics=pipe.metrics.registry)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                 base_url="http://api") as client:
        before = await scrape(client)
        assert value(before, "edgesync_database_scrape_ok") == 1
        f = batches()
        out = await pipe.handle(f"{scope.root_topic}/sync/rows/batch", f.payload(f.rows(
            ("insert", {"id": 1, "mode": "a", "setpoint": 1.0}),
            ("insert", {"id": 2, "mode": "b", "setpoint": 2.0}))))
        assert out.status is OutcomeStatus.STAGED
        staged = await scrape(client)
        assert moved(before, staged, "edgesync_staged_rows", pipeline="rows") == 2
        assert moved(before, staged, "edgesync_staged_bytes", pipeline="rows") > 0
        assert value(staged, "edgesync_staged_rows_project_max") >= 2
        # Two staged rows are over the project's cap of one: paused, the device told.
        assert moved(before, staged, "edgesync_lineages", pipeline="rows", status="paused",
                     reason="backpressure") == 1
        assert moved(before, staged, "edgesync_lineage_pauses_total",
                     reason="backpressure") == 1
        assert moved(before, staged, "edgesync_controls", status="pending",
                     kind="pause_lineage") == 1
        assert moved(before, staged, "edgesync_reviews_open", status="queued") == 1
        assert moved(before, staged, "edgesync_devices", seen="yes") == 1
        buckets = "edgesync_device_last_seen_age_seconds_bucket"
        # One more device seen, and just now (the age buckets are over the whole shared
        # database: earlier tests' devices age out of the 10 s bucket meanwhile).
        assert moved(before, staged, buckets, le="+Inf") == 1
        assert value(staged, buckets, le="10.0") >= 1

        control_id = await pool.fetchval(
            "SELECT id FROM edge_pending_controls WHERE device_id = $1", scope.device_id)
        ack = await pipe.handle(f"{scope.root_topic}/sync/ingest/ack",
                                orjson.dumps({"control_id": str(control_id)}))
        assert ack.status is OutcomeStatus.MATERIALIZED
        acked = await scrape(client)
        assert moved(staged, acked, "edgesync_controls", status="pending",
                     kind="pause_lineage") == -1
        assert moved(staged, acked, "edgesync_controls", status="acked",
                     kind="pause_lineage") == 1

        await approve(pool, out.lineage_id)
        waiting = await scrape(client)
        assert moved(acked, waiting, "edgesync_replay_intents", status="pending") >= 1
        assert value(waiting, "edgesync_replay_rows_left") >= 2
        assert moved(acked, waiting, "edgesync_reviews_open", status="queued") == -1
        assert await Replayer(pool).drain_pending(project_id=scope.project_id) == 2
        replayed = await scrape(client)
        assert moved(waiting, replayed, "edgesync_replay_rows_done", status="done") == 2
        assert moved(before, replayed, "edgesync_staged_rows", pipeline="rows") == 0
        # The ingest side of the same registry.
        assert value(replayed, "edgesync_ingest_messages_total", kind="rows_batch",
                     outcome="staged", code="schema_review") == 1


async def test_serve_counts_a_run_with_duplicates_and_rejections(
        database_url: str, tmp_path: Path, unique: str, batches: Any) -> None:
    # A broker of its own: the counters are totals, and on the shared broker the server
    # would also count whatever other tests publish meanwhile.
    port = free_port()
    conf = tmp_path / "mosquitto.conf"
    conf.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\nuser root\n")
    broker = Mosquitto(conf, tmp_path / "mosquitto.log")
    await broker.start([port])
    mqtt_url = f"tcp://127.0.0.1:{port}"
    try:
        await _count_a_run(database_url, mqtt_url, tmp_path, unique, batches)
    finally:
        await broker.stop()


async def _count_a_run(database_url: str, mqtt_url: str, tmp_path: Path, unique: str,
                       batches: Any) -> None:
    async with cloud(database_url, mqtt_url, tmp_path, unique) as server:
        pool = pool_of(server)
        async with pool.acquire() as conn:
            scope = await fleet.add_device(conn, project=f"s-{unique}", name=f"d-{unique}",
                                           topic_slug=f"s-{unique}")
        f = batches()
        good = [f.payload(f.rows(("insert", {"id": i, "mode": "m", "setpoint": 1.0})))
                for i in range(3)]
        bad = f.payload(f.rows(("insert", {"id": 9, "mode": "m", "setpoint": 1.0})),
                        device_id="smuggled")
        topic = f"{scope.root_topic}/sync/rows/batch"
        sent = [(topic, p) for p in good] * 2 + [(topic, bad)] + [
            (f"s-{unique}/stranger-{unique}/sync/rows/batch", good[0])]
        async with mqtt_client(parse_broker_url(mqtt_url), identifier=f"dev-{unique}",
                               clean_session=True) as client:
            for t, p in sent:
                await client.publish(t, p, qos=1)
        assert server.api is not None
        last: list[Any] = []
        async with httpx.AsyncClient(base_url=server.api.url) as http:
            async def all_ended() -> Samples | None:
                s = await scrape(http)
                last[:] = [conservation(s)["rows_batch"]]
                return s if last[0][1] == len(sent) else None

            try:
                s = await eventually(all_ended, LIMIT, "every message's outcome counted")
            except AssertionError as exc:
                raise AssertionError(f"{exc}; (received, ended, in flight) = {last}") from None
        assert_conserved(s)
        assert conservation(s)["rows_batch"] == (len(sent), len(sent), 0)
        msgs = "edgesync_ingest_messages_total"
        # The first copy of each batch staged (review), the second a duplicate.
        assert value(s, msgs, kind="rows_batch", outcome="staged", code="schema_review") == 3
        assert value(s, msgs, kind="rows_batch", outcome="duplicate", code="") == 3
        assert value(s, msgs, kind="rows_batch", outcome="rejected",
                     code="envelope_unstripped_tenant_fields") == 1
        assert value(s, msgs, kind="rows_batch", outcome="rejected", code="unknown_device") == 1
        assert total(s, "edgesync_loop_up") >= 6
        assert value(s, "edgesync_loop_up", loop="replay") == 1
        # The API answered this scrape: its loop is up (it read 0 for ever, issue 27).
        assert value(s, "edgesync_loop_up", loop="api") == 1
        assert value(s, "edgesync_build_info", version=next(
            dict(ls)["version"] for n, ls in s if n == "edgesync_build_info")) == 1
        assert value(s, "edgesync_ingest_in_flight_max") >= 1
        assert value(s, "edgesync_ingest_group_queue") == 0
