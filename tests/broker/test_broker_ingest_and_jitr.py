"""The worker ingests through the secured broker; JITR-enrolled devices connect; a
bootstrap certificate is no MQTT credential."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiomqtt
import pytest
import yaml
from broker_helpers import Deployment, until

from edgesync import credentials
from edgesync.agent import Agent
from edgesync.agent.config import parse_config
from edgesync.credentials import make_csr, new_key, private_key_pem
from edgesync.ingest import IngestPipeline, MqttIngest
from edgesync.protocol import BrokerUrl, TlsFiles, TopicKind

ROWS = TopicKind.ROWS_BATCH.value


async def test_worker_ingests_legitimate_batches_only(deployment: Deployment,
                                                      batches: Callable[..., Any]) -> None:
    dep = deployment
    a = await dep.add_device("dev-a")
    b = await dep.add_device("dev-b")
    await dep.start()
    url = BrokerUrl("127.0.0.1", dep.opts.worker_port, tls=True,
                    username=dep.opts.worker_username, password=dep.worker_password)
    ingest = MqttIngest(IngestPipeline(dep.pool), url, client_id=f"ingest-{dep.slug}",
                        tls=TlsFiles(dep.server_ca))
    task = asyncio.create_task(ingest.run())
    try:
        async with asyncio.timeout(20):
            await ingest.connected.wait()
        f = batches()
        forged = f.payload(f.rows(("insert", {"id": 1, "mode": "forged", "setpoint": 1.0})))
        real = f.payload(f.rows(("insert", {"id": 2, "mode": "real", "setpoint": 2.0})))
        async with dep.device_mtls("dev-a") as dev_a:
            await dev_a.publish(dep.topic("dev-b", ROWS), forged, qos=1)
            await dev_a.publish(dep.topic("dev-a", ROWS), real, qos=1)
        # The pipeline handles messages one by one in arrival order: once dev-a's batch is
        # in the ledger, the forged one would be too had the broker let it through.
        async with dep.pool.acquire() as conn:
            async def arrived() -> bool:
                return bool(await conn.fetchval(
                    "SELECT count(*) FROM edge_export_segments WHERE device_id = $1",
                    a.device_id))

            await until(arrived)
            assert await conn.fetchval(
                "SELECT count(*) FROM edge_export_segments WHERE device_id = $1",
                b.device_id) == 0
            outcome = await conn.fetchval(
                "SELECT outcome FROM edge_export_segments WHERE device_id = $1", a.device_id)
        assert outcome in ("staged", "materialized")
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _enroll(dep: Deployment, boot: credentials.BootstrapSecret, name: str
                  ) -> tuple[credentials.Enrollment, str]:
    key = new_key()
    async with dep.pool.acquire() as conn:
        got = await credentials.enroll(conn, boot.project_id, bootstrap_cert_pem=boot.cert_pem,
                                       csr_pem=make_csr(key, name))
    return got, private_key_pem(key)


async def test_enrolled_device_connects_and_survives_bootstrap_revocation(
        deployment: Deployment) -> None:
    dep = deployment
    await dep.add_device("seed", cert=False, password=False)  # creates the fleet
    async with dep.pool.acquire() as conn:
        project_id = await conn.fetchval("SELECT id FROM edge_projects WHERE name = $1",
                                         dep.project)
        fleet_id = await conn.fetchval("SELECT id FROM edge_fleets WHERE project_id = $1",
                                       project_id)
        boot = await credentials.issue_bootstrap(conn, project_id, fleet_id, max_devices=5)
    await dep.start()
    got, key_pem = await _enroll(dep, boot, "jitr-1")
    assert got.root_topic == f"{dep.slug}/jitr-1"
    tls = dep.key_files("jitr-1", got.certificate.cert_pem, key_pem)

    async def round_trip() -> None:
        async with dep.worker() as worker, aiomqtt.Client(
                "127.0.0.1", dep.opts.mtls_port, identifier="jitr-1",
                tls_context=tls.context()) as device:
            await worker.subscribe(f"+/+/{ROWS}", qos=1)
            await device.publish(dep.topic("jitr-1", ROWS), b"hello", qos=1)
            msg = await dep.next_message(worker)
            assert (str(msg.topic), msg.payload) == (dep.topic("jitr-1", ROWS), b"hello")

    await round_trip()
    async with dep.pool.acquire() as conn:
        await credentials.revoke_bootstrap(conn, project_id, boot.serial)
    await dep.apply()
    await round_trip()  # enrolled devices keep working
    with pytest.raises(credentials.EnrollmentError) as err:
        await _enroll(dep, boot, "jitr-2")
    assert err.value.code == "BOOTSTRAP_CERT_REVOKED"


async def test_bootstrap_certificate_cannot_log_in_to_the_broker(
        deployment: Deployment) -> None:
    """Bootstrap certificates come from the project CA, which no listener trusts."""
    dep = deployment
    await dep.add_device("seed", cert=False, password=False)
    async with dep.pool.acquire() as conn:
        project_id = await conn.fetchval("SELECT id FROM edge_projects WHERE name = $1",
                                         dep.project)
        fleet_id = await conn.fetchval("SELECT id FROM edge_fleets WHERE project_id = $1",
                                       project_id)
        boot = await credentials.issue_bootstrap(conn, project_id, fleet_id, max_devices=1)
    await dep.start()
    assert not await dep.mtls_accepts(boot.cert_pem, boot.key_pem)


async def test_device_of_another_project_cannot_log_in(deployment: Deployment,
                                                       unique: str) -> None:
    """Same device name, other project (other device CA): refused on this listener."""
    dep = deployment
    await dep.add_device("dev-a", password=False)
    await dep.start()
    from edgesync import fleet

    async with dep.pool.acquire() as conn:
        other = await fleet.add_device(conn, project=f"other-{unique}", name="dev-a",
                                       topic_slug=f"o{unique}")
        secret = await credentials.issue_certificate(conn, other)
    assert secret.key_pem is not None
    assert not await dep.mtls_accepts(secret.cert_pem, secret.key_pem)
    mine = dep.certs["dev-a"]
    assert mine.key_pem is not None and await dep.mtls_accepts(mine.cert_pem, mine.key_pem)


async def test_device_bundle_agent_syncs_through_the_secured_broker(
        deployment: Deployment, tmp_path: Path) -> None:
    """What ``edgesync devices bundle`` writes is enough for the real agent to connect
    over mTLS and for the worker to ingest its batch."""
    dep = deployment
    scope = await dep.add_device("gw-bundle", cert=False, password=False)
    await dep.start()
    source = tmp_path / "app.db"
    with contextlib.closing(sqlite3.connect(source)) as db, db:
        db.execute("CREATE TABLE device_state (id INTEGER PRIMARY KEY, mode TEXT)")
    out = tmp_path / "bundle"
    async with dep.pool.acquire() as conn:
        token = await credentials.ensure_control_token(conn, scope.device_id)
        cert = await credentials.issue_certificate(conn, scope)
        ca = await credentials.server_ca(conn)
    credentials.write_bundle(out, scope, mqtt_url=f"ssl://127.0.0.1:{dep.opts.mtls_port}",
                             control_token=token, certificate=cert, broker_ca_pem=ca.cert_pem,
                             install_dir=out, source_db_path=str(source),
                             state_db_path=str(tmp_path / "state.db"))
    env = dict(line.split("=", 1) for line in (out / "agent.env").read_text().splitlines()
               if line and not line.startswith("#"))
    cfg, errors = parse_config(yaml.safe_load((out / "agent.yaml").read_text()), env)
    assert not errors and cfg is not None

    url = BrokerUrl("127.0.0.1", dep.opts.worker_port, tls=True,
                    username=dep.opts.worker_username, password=dep.worker_password)
    ingest = MqttIngest(IngestPipeline(dep.pool), url, client_id=f"ingest-{dep.slug}",
                        tls=TlsFiles(dep.server_ca))
    task = asyncio.create_task(ingest.run())
    try:
        async with asyncio.timeout(20):
            await ingest.connected.wait()
        async with Agent(cfg) as agent:
            with contextlib.closing(sqlite3.connect(source)) as db, db:
                db.execute("INSERT INTO device_state VALUES (1, 'auto')")
            async with asyncio.timeout(20):
                assert await agent.flush() == 1

            async def ingested() -> bool:
                async with dep.pool.acquire() as conn:
                    return bool(await conn.fetchval(
                        "SELECT count(*) FROM edge_export_segments WHERE device_id = $1 "
                        "AND outcome <> 'rejected'", scope.device_id))

            await until(ingested)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
