"""Sync policies over HTTP: introspection of a sample database, CRUD with one-line
validation messages naming the field, attachments (device over fleet), the controls
queued for governed devices, and the bundle carrying the attached policy."""

from __future__ import annotations

import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import yaml
from kits.api_fixtures import sample_db

from edgesync import fleet
from edgesync.agent.config import parse_config


def idem() -> dict[str, str]:
    return {"Idempotency-Key": str(uuid.uuid4())}


async def _introspect(client: httpx.AsyncClient, tenant: Any, data: bytes) -> httpx.Response:
    return await client.post(tenant.url("/edge/sync-policies/introspect"),
                             headers={**tenant.reader(),
                                      "Content-Type": "application/octet-stream"},
                             content=data)


async def test_introspection_of_a_sample_database(client: httpx.AsyncClient, tenant,
                                                  tmp_path: Path) -> None:
    r = await _introspect(client, tenant, sample_db(tmp_path / "sample.db"))
    assert r.status_code == 200, r.text
    data = r.json()["data"]
    tables = {t["name"]: t for t in data["tables"]}
    assert sorted(tables) == ["events_log", "readings", "scratch", "settings"]
    assert tables["readings"]["columns"][:2] == [
        {"name": "id", "type": "INTEGER", "primary_key": 1, "not_null": False},
        {"name": "recorded_at", "type": "DATETIME", "primary_key": 0, "not_null": True}]
    assert (tables["settings"]["row_count"], tables["readings"]["row_count"]) == (2, 1)
    assert data["table_strategies"] == {
        "settings": {"strategy": "rows"},
        "readings": {"strategy": "telemetry", "ts_column": "recorded_at"},
        "scratch": {"strategy": "ignore"},
        "events_log": {"strategy": "telemetry", "ts_column": "ts"}}
    assert data["sample_tables"]["settings"] == ["key", "value"]

    for body, message in ((b"", "empty"), (b"not a database at all", "not a SQLite database"),
                          (b"SQLite format 3\x00" + b"\x00" * 50, "not a readable")):
        r = await _introspect(client, tenant, body)
        assert r.status_code == 422, r.text
        assert r.json()["error"]["field"] == "file"
        assert message in r.json()["error"]["message"]


async def test_crud_and_validation_messages(client: httpx.AsyncClient, tenant,
                                            tmp_path: Path) -> None:
    intro = (await _introspect(client, tenant, sample_db(tmp_path / "s.db"))).json()["data"]
    body = {"name": "plant-floor", "description": "from the sample",
            "table_strategies": {**intro["table_strategies"],
                                 "readings": {"strategy": "telemetry",
                                              "ts_column": "recorded_at",
                                              "include_columns": ["temp"]}},
            "sample_tables": intro["sample_tables"]}
    r = await client.post(tenant.url("/edge/sync-policies"), headers=tenant.headers(**idem()),
                          json=body)
    assert r.status_code == 201, r.text
    policy = r.json()["data"]
    assert policy["version"] == 1
    assert policy["table_strategies"]["readings"]["include_columns"] == ["temp"]
    pid = policy["id"]

    dup = await client.post(tenant.url("/edge/sync-policies"),
                            headers=tenant.headers(**idem()), json=body)
    assert (dup.status_code, dup.json()["error"]["code"], dup.json()["error"]["field"]) == (
        409, "SYNC_POLICY_NAME_IN_USE", "name")

    bad: list[tuple[dict[str, Any], str, str]] = [
        ({"table_strategies": {"readings": {"strategy": "telemetry"}}},
         "table_strategies.readings.ts_column", "required for strategy telemetry"),
        ({"table_strategies": {"settings": {"strategy": "rows", "ts_column": "key"}}},
         "table_strategies.settings.ts_column", "only valid with strategy telemetry"),
        ({"table_strategies": {"settings": {"strategy": "mirror"}}},
         "table_strategies.settings.strategy", "'rows', 'telemetry' or 'ignore'"),
        ({"table_strategies": {"readings": {"strategy": "telemetry", "ts_column": "when"}}},
         "table_strategies.readings.ts_column", "'when' is not a column of 'readings'"),
        ({"table_strategies": {"readings": {"strategy": "telemetry", "ts_column": "recorded_at",
                                            "include_columns": ["temp", "nope"]}}},
         "table_strategies.readings.include_columns", "'nope' is not a column"),
        ({"table_strategies": {"ghost": {"strategy": "rows"}}},
         "table_strategies.ghost", "not a table of the sample database"),
        ({"table_strategies": {"sqlite_sequence": {"strategy": "rows"}}},
         "table_strategies.sqlite_sequence.strategy", "internal tables cannot be replicated"),
        ({"table_strategies": {"settings": "rows"}},
         "table_strategies.settings", "must be a mapping with a strategy"),
        ({"name": "  "}, "name", "must not be empty"),
    ]
    for change, field, message in bad:
        r = await client.patch(tenant.url(f"/edge/sync-policies/{pid}"),
                               headers=tenant.headers(**idem()), json=change)
        assert r.status_code == 422, (change, r.text)
        err = r.json()["error"]
        assert (err["field"], "\n" in err["message"]) == (field, False), (change, err)
        assert message in err["message"], (change, err)
    r = await client.post(tenant.url("/edge/sync-policies"), headers=tenant.headers(**idem()),
                          json={"name": "x", "table_strategies": {"t": {"strategy": "telemetry"}}})
    assert (r.status_code, r.json()["error"]["field"]) == (422, "table_strategies.t.ts_column")

    r = await client.patch(tenant.url(f"/edge/sync-policies/{pid}"),
                           headers=tenant.headers(**idem()),
                           json={"table_strategies": {"settings": {"strategy": "ignore"}}})
    assert r.status_code == 200, r.text
    assert (r.json()["data"]["version"], r.json()["data"]["table_strategies"]) == (
        2, {"settings": {"strategy": "ignore"}})
    got = await client.get(tenant.url(f"/edge/sync-policies/{pid}"), headers=tenant.reader())
    assert got.json()["data"]["version"] == 2
    listed = await client.get(tenant.url("/edge/sync-policies"), headers=tenant.reader())
    assert [p["name"] for p in listed.json()["data"]] == ["plant-floor"]

    r = await client.delete(tenant.url(f"/edge/sync-policies/{pid}"),
                            headers=tenant.headers(**idem()))
    assert r.status_code == 200, r.text
    gone = await client.get(tenant.url(f"/edge/sync-policies/{pid}"), headers=tenant.reader())
    assert (gone.status_code, gone.json()["error"]["code"]) == (404, "SYNC_POLICY_NOT_FOUND")


async def _device(client: httpx.AsyncClient, tenant: Any, name: str, fleet: str | None = None
                  ) -> dict[str, Any]:
    r = await client.post(tenant.url("/devices"), headers=tenant.headers(**idem()),
                          json={"name": name, **({"fleet": fleet} if fleet else {})})
    assert r.status_code == 201, r.text
    return dict(r.json()["data"])


async def _policy(client: httpx.AsyncClient, tenant: Any, name: str,
                  strategies: dict[str, Any]) -> str:
    r = await client.post(tenant.url("/edge/sync-policies"), headers=tenant.headers(**idem()),
                          json={"name": name, "table_strategies": strategies})
    assert r.status_code == 201, r.text
    return str(r.json()["data"]["id"])


async def _controls(pool: asyncpg.Pool, device_id: str) -> list[tuple[str, dict[str, Any]]]:
    rows = await pool.fetch(
        "SELECT status, body FROM edge_pending_controls WHERE device_id = $1 "
        "AND control_kind = 'sync_policy' ORDER BY created_at", uuid.UUID(device_id))
    return [(r["status"], dict(r["body"])) for r in rows]


async def test_attachments_device_over_fleet_and_controls_queued(
        client: httpx.AsyncClient, tenant, pool: asyncpg.Pool) -> None:
    a = await _device(client, tenant, "gw-a", fleet="north")
    b = await _device(client, tenant, "gw-b", fleet="north")
    fleet_pid = await _policy(client, tenant, "fleet-wide", {"t": {"strategy": "rows"}})
    own_pid = await _policy(client, tenant, "special", {"t": {"strategy": "ignore"}})

    r = await client.post(tenant.url(f"/edge/sync-policies/{fleet_pid}/attach"),
                          headers=tenant.headers(**idem()), json={"fleet_id": a["fleet_id"]})
    assert r.status_code == 200, r.text
    r = await client.post(tenant.url(f"/edge/sync-policies/{own_pid}/attach"),
                          headers=tenant.headers(**idem()), json={"device_id": b["id"]})
    assert r.status_code == 200, r.text

    eff = {d["name"]: (await client.get(tenant.url(f"/devices/{d['id']}/sync-policy"),
                                        headers=tenant.reader())).json()["data"]
           for d in (a, b)}
    assert (eff["gw-a"]["name"], eff["gw-a"]["attached_via"]) == ("fleet-wide", "fleet")
    assert (eff["gw-b"]["name"], eff["gw-b"]["attached_via"]) == ("special", "device")

    # gw-b: the fleet's control was superseded by its own policy's.
    (first, second) = await _controls(pool, b["id"])
    assert first[0] == "superseded" and second[0] == "pending"
    assert second[1]["table_strategies"] == {"t": {"strategy": "ignore"}}
    assert second[1]["revision"] > first[1]["revision"]

    # A change reaches only the devices the policy governs.
    r = await client.patch(tenant.url(f"/edge/sync-policies/{fleet_pid}"),
                           headers=tenant.headers(**idem()),
                           json={"table_strategies": {"t": {"strategy": "telemetry",
                                                            "ts_column": "at"}}})
    assert r.status_code == 200, r.text
    a_controls = await _controls(pool, a["id"])
    assert [s for s, _ in a_controls] == ["superseded", "pending"]
    assert a_controls[-1][1]["policy_version"] == 2
    assert len(await _controls(pool, b["id"])) == 2
    governed = (await client.get(tenant.url(f"/edge/sync-policies/{fleet_pid}/devices"),
                                 headers=tenant.reader())).json()["data"]
    assert [(d["name"], d["delivery"], d["delivered_version"]) for d in governed] == [
        ("gw-a", "pending", 2)]

    # Detached from gw-b: it falls back to its fleet's policy.
    r = await client.post(tenant.url(f"/edge/sync-policies/{own_pid}/detach"),
                          headers=tenant.headers(**idem()), json={"device_id": b["id"]})
    assert r.status_code == 200, r.text
    assert (await _controls(pool, b["id"]))[-1][1]["policy_name"] == "fleet-wide"
    r = await client.post(tenant.url(f"/edge/sync-policies/{own_pid}/detach"),
                          headers=tenant.headers(**idem()), json={"device_id": b["id"]})
    assert (r.status_code, r.json()["error"]["code"]) == (404, "ATTACHMENT_NOT_FOUND")
    # Deleted: no policy left, the agents go back to their YAML (table_strategies null).
    r = await client.delete(tenant.url(f"/edge/sync-policies/{fleet_pid}"),
                            headers=tenant.headers(**idem()))
    assert r.status_code == 200, r.text
    assert (await _controls(pool, a["id"]))[-1][1]["table_strategies"] is None

    for target, field in (({}, "device_id"), ({"device_id": str(uuid.uuid4())}, "device_id"),
                          ({"fleet_id": str(uuid.uuid4())}, "fleet_id")):
        r = await client.post(tenant.url(f"/edge/sync-policies/{own_pid}/attach"),
                              headers=tenant.headers(**idem()), json=target)
        assert r.status_code in (404, 422), r.text
        assert r.json()["error"]["field"] == field


async def test_attachments_listed_with_names_and_scoped_to_the_project(
        client: httpx.AsyncClient, tenant, other_tenant, pool: asyncpg.Pool) -> None:
    a = await _device(client, tenant, "gw-a", fleet="north")
    solo = await _device(client, tenant, "gw-solo")
    async with pool.acquire() as conn:  # a fleet no device is in (yet)
        empty_id = await fleet.ensure_fleet(conn, tenant.project_id, "empty")
    pid = await _policy(client, tenant, "listed", {"t": {"strategy": "rows"}})
    other_pid = await _policy(client, tenant, "other", {"t": {"strategy": "ignore"}})
    path = tenant.url(f"/edge/sync-policies/{pid}/attachments")
    r = await client.get(path, headers=tenant.reader())
    assert (r.status_code, r.json()["data"]) == (200, [])

    for target in ({"fleet_id": str(empty_id)}, {"fleet_id": a["fleet_id"]},
                   {"device_id": solo["id"]}, {"device_id": a["id"]}):
        r = await client.post(tenant.url(f"/edge/sync-policies/{pid}/attach"),
                              headers=tenant.headers(**idem()), json=target)
        assert r.status_code == 200, r.text
    r = await client.get(path, headers=tenant.reader())
    assert r.status_code == 200, r.text
    listed = r.json()["data"]
    assert [(x["attached_to"], x["name"], x["device_id"], x["fleet_id"]) for x in listed] == [
        ("device", "gw-a", a["id"], None), ("device", "gw-solo", solo["id"], None),
        ("fleet", "empty", None, str(empty_id)), ("fleet", "north", None, a["fleet_id"])]
    stored = {str(rec["id"]): rec["created_at"] for rec in await pool.fetch(
        "SELECT id, created_at FROM edge_sync_policy_attachments WHERE policy_id = $1",
        uuid.UUID(pid))}
    assert {x["id"]: datetime.fromisoformat(x["created_at"]) for x in listed} == stored

    # Another policy attached to gw-solo replaces this one there; detaching north drops it.
    r = await client.post(tenant.url(f"/edge/sync-policies/{other_pid}/attach"),
                          headers=tenant.headers(**idem()), json={"device_id": solo["id"]})
    assert r.status_code == 200, r.text
    r = await client.post(tenant.url(f"/edge/sync-policies/{pid}/detach"),
                          headers=tenant.headers(**idem()), json={"fleet_id": a["fleet_id"]})
    assert r.status_code == 200, r.text
    r = await client.get(path, headers=tenant.reader())
    assert [x["name"] for x in r.json()["data"]] == ["gw-a", "empty"]
    r = await client.get(tenant.url(f"/edge/sync-policies/{other_pid}/attachments"),
                         headers=tenant.reader())
    assert [(x["attached_to"], x["name"]) for x in r.json()["data"]] == [("device", "gw-solo")]

    # Another project's token: not its project, nor its policy; nothing about them leaks.
    r = await client.get(path, headers=other_tenant.headers())
    assert (r.status_code, r.json()["error"]["code"]) == (404, "PROJECT_NOT_FOUND")
    r = await client.get(other_tenant.url(f"/edge/sync-policies/{pid}/attachments"),
                         headers=other_tenant.headers())
    assert (r.status_code, r.json()["error"]["code"]) == (404, "SYNC_POLICY_NOT_FOUND")
    r = await client.get(tenant.url(f"/edge/sync-policies/{uuid.uuid4()}/attachments"),
                         headers=tenant.reader())
    assert (r.status_code, r.json()["error"]["code"]) == (404, "SYNC_POLICY_NOT_FOUND")


async def test_fleets_listed_with_their_device_counts(client: httpx.AsyncClient, tenant,
                                                      other_tenant, pool: asyncpg.Pool) -> None:
    await _device(client, tenant, "gw-n1", fleet="north")
    await _device(client, tenant, "gw-n2", fleet="north")
    await _device(client, tenant, "gw-none")
    async with pool.acquire() as conn:
        await fleet.ensure_fleet(conn, tenant.project_id, "empty")
        await fleet.ensure_fleet(conn, other_tenant.project_id, "theirs")
    r = await client.get(tenant.url("/fleets"), headers=tenant.reader())
    assert r.status_code == 200, r.text
    assert [(f["name"], f["device_count"]) for f in r.json()["data"]] == [
        ("empty", 0), ("north", 2)]
    assert r.json()["meta"]["total"] == 2
    r = await client.get(tenant.url("/fleets"), headers=tenant.reader(),
                         params={"limit": 1, "page": 2})
    assert [f["name"] for f in r.json()["data"]] == ["north"]
    r = await client.get(tenant.url("/fleets"), headers=other_tenant.headers())
    assert (r.status_code, r.json()["error"]["code"]) == (404, "PROJECT_NOT_FOUND")


async def test_bundle_includes_the_attached_policy(client: httpx.AsyncClient, tenant,
                                                   pool: asyncpg.Pool, tmp_path: Path) -> None:
    dev = await _device(client, tenant, "gw-bundle")
    strategies = {"readings": {"strategy": "telemetry", "ts_column": "recorded_at",
                               "include_columns": ["temp"]},
                  "scratch": {"strategy": "ignore"}}
    pid = await _policy(client, tenant, "bundled", strategies)
    r = await client.post(tenant.url(f"/edge/sync-policies/{pid}/attach"),
                          headers=tenant.headers(**idem()), json={"device_id": dev["id"]})
    assert r.status_code == 200, r.text
    key = idem()
    body = {"mqtt_url": "ssl://broker.example:8883", "install_dir": str(tmp_path)}
    r = await client.post(tenant.url(f"/devices/{dev['id']}/bundle"),
                          headers=tenant.headers(**key), json=body)
    assert r.status_code == 201, r.text
    out = r.json()["data"]
    assert (out["sync_policy"]["name"], out["sync_policy"]["version"]) == ("bundled", 1)
    files = {f["name"]: f for f in out["files"]}
    # The deployment's server CA goes along once any test of this database has made one.
    server_ca = await pool.fetchval(
        "SELECT count(*) FROM edge_certificate_authorities WHERE purpose = 'server'")
    assert sorted(files) == ["agent.env", "agent.yaml", *(["ca.pem"] if server_ca else []),
                             "device.key", "device.pem"]
    for f in out["files"]:  # as the operator copies them to the device
        (tmp_path / f["name"]).write_text(f["content"])
    assert (files["device.key"]["mode"], files["agent.env"]["mode"]) == ("0600", "0600")
    doc = yaml.safe_load(files["agent.yaml"]["content"])
    rep = doc["sqlite-replication"]
    assert rep["table_strategies"] == strategies and rep["remote_policy"] is True
    env = dict(line.split("=", 1) for line in files["agent.env"]["content"].splitlines()
               if "=" in line and not line.startswith("#"))
    cfg, errors = parse_config(doc, environ=env)
    assert errors == [] and cfg is not None
    assert cfg.replication.strategy_for("readings").include_columns == ("temp",)
    # A retry gets the same answer without the secrets (they are shown once).
    again = await client.post(tenant.url(f"/devices/{dev['id']}/bundle"),
                              headers=tenant.headers(**key), json=body)
    assert again.status_code == 201 and again.headers["Idempotent-Replayed"] == "true"
    assert {f["content"] for f in again.json()["data"]["files"]} == {
        "shown once: issue again for a new one"}
    stored = await pool.fetchval(
        "SELECT response_body FROM edge_idempotency_keys WHERE idempotency_key = $1",
        key["Idempotency-Key"])
    assert b"PRIVATE KEY" not in bytes(stored)


async def test_compression_and_priority_travel_with_the_policy(
        client: httpx.AsyncClient, tenant, pool: asyncpg.Pool, tmp_path: Path) -> None:
    dev = await _device(client, tenant, "gw-wire")
    strategies = {"readings": {"strategy": "telemetry", "ts_column": "at", "priority": 20},
                  "alarms": {"strategy": "rows", "priority": 0}}
    r = await client.post(tenant.url("/edge/sync-policies"), headers=tenant.headers(**idem()),
                          json={"name": "cellular", "table_strategies": strategies,
                                "compression": "zstd", "max_bytes_per_day": 50_000_000})
    assert r.status_code == 201, r.text
    policy = r.json()["data"]
    assert (policy["compression"], policy["table_strategies"]) == ("zstd", strategies)
    assert (policy["max_bytes_per_second"], policy["max_bytes_per_day"]) == (None, 50_000_000)
    pid = policy["id"]
    for change, field, message in (
            ({"compression": "gzip"}, "compression", "'gzip' is not allowed; use 'none' or "
                                                     "'zstd'"),
            ({"table_strategies": {"alarms": {"strategy": "rows", "priority": "first"}}},
             "table_strategies.alarms.priority", "must be an integer"),
            ({"max_bytes_per_second": -1}, "max_bytes_per_second", "is not a budget")):
        bad = await client.patch(tenant.url(f"/edge/sync-policies/{pid}"),
                                 headers=tenant.headers(**idem()), json=change)
        assert bad.status_code == 422, bad.text
        assert bad.json()["error"]["field"] == field
        assert message in bad.json()["error"]["message"]
    r = await client.post(tenant.url(f"/edge/sync-policies/{pid}/attach"),
                          headers=tenant.headers(**idem()), json={"device_id": dev["id"]})
    assert r.status_code == 200, r.text
    [(_, sent)] = await _controls(pool, dev["id"])
    assert (sent["compression"], sent["table_strategies"]) == ("zstd", strategies)
    assert (sent["max_bytes_per_second"], sent["max_bytes_per_day"]) == (None, 50_000_000)
    # A change of compression alone reaches the agents; null gives it back to their YAML.
    r = await client.patch(tenant.url(f"/edge/sync-policies/{pid}"),
                           headers=tenant.headers(**idem()), json={"compression": None})
    assert r.status_code == 200 and r.json()["data"]["compression"] is None, r.text
    controls = await _controls(pool, dev["id"])
    assert len(controls) == 2 and controls[-1][1]["compression"] is None
    # The bundle carries it; an agent reads it by the YAML's rules.
    await client.patch(tenant.url(f"/edge/sync-policies/{pid}"),
                       headers=tenant.headers(**idem()), json={"compression": "none"})
    r = await client.post(tenant.url(f"/devices/{dev['id']}/bundle"),
                          headers=tenant.headers(**idem()),
                          json={"mqtt_url": "ssl://broker.example:8883",
                                "install_dir": str(tmp_path)})
    assert r.status_code == 201, r.text
    files = {f["name"]: f["content"] for f in r.json()["data"]["files"]}
    for name, content in files.items():
        (tmp_path / name).write_text(content)
    doc = yaml.safe_load(files["agent.yaml"])
    env = dict(line.split("=", 1) for line in files["agent.env"].splitlines()
               if "=" in line and not line.startswith("#"))
    cfg, errors = parse_config(doc, environ=env)
    assert errors == [] and cfg is not None
    assert cfg.replication.compression == "none"
    assert cfg.replication.strategy_for("readings").rank == 20
    assert cfg.connection.max_bytes_per_day == 50_000_000
