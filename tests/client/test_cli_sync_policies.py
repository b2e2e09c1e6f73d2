"""``edgesync sync-policies …`` over the HTTP API, and ``edgesync devices bundle`` (on the
database) writing the attached policy into agent.yaml."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from kits.api_cli import Cli
from kits.api_fixtures import sample_db

EDGESYNC = shutil.which("edgesync", path=str(Path(sys.executable).parent)) or "edgesync"


async def test_sync_policies_through_the_cli(run: Cli, tenant, tmp_path: Path,
                                             database_url: str) -> None:
    db = tmp_path / "sample.db"
    sample_db(db)
    _, out, _ = run("sync-policies", "introspect", str(db))
    assert "readings" in out and "telemetry:recorded_at" in out and "scratch" in out

    created = run.json("sync-policies", "create", "floor", "--from-db", str(db),
                       "--table", "readings=telemetry:recorded_at:temp,humidity",
                       "--table", "events_log=ignore")["data"]
    assert created["table_strategies"]["readings"] == {
        "strategy": "telemetry", "ts_column": "recorded_at",
        "include_columns": ["temp", "humidity"]}
    assert created["table_strategies"]["settings"] == {"strategy": "rows"}
    pid = created["id"]

    code, out, err = run("sync-policies", "update", pid, "--table",
                         "readings=telemetry:when", "--output", "json", ok=False)
    assert code != 0
    assert "table_strategies.readings.ts_column" in out + err
    assert "'when' is not a column of 'readings'" in out + err
    code, _, err = run("sync-policies", "create", "x", "--table", "t=telemetry", ok=False)
    assert code != 0 and "--table" in err and "TS_COLUMN" in err

    dev = run.json("devices", "add", "gw-pol", "--fleet", "north")["data"]
    run("sync-policies", "attach", pid, "--fleet-id", dev["fleet_id"])
    listed = run.json("sync-policies", "attachments", pid)["data"]
    assert [(x["attached_to"], x["name"], x["fleet_id"]) for x in listed] == [
        ("fleet", "north", dev["fleet_id"])]
    _, out, _ = run("sync-policies", "attachments", pid)
    header, row = out.splitlines()
    assert header.split()[:2] == ["TO", "NAME"] and header.endswith("ATTACHED")
    assert row.split()[:4] == ["fleet", "north", "-", dev["fleet_id"]]
    updated = run.json("sync-policies", "update", pid, "--remove-table", "events_log")["data"]
    assert updated["version"] == 2 and "events_log" not in updated["table_strategies"]
    _, out, _ = run("sync-policies", "show", pid)
    assert "gw-pol" in out and "fleet" in out and "pending" in out
    _, out, _ = run("sync-policies", "list")
    assert "floor" in out

    # The bundle written on the database carries the policy the device's fleet has.
    bundle_dir = tmp_path / "bundle"
    done = await asyncio.to_thread(subprocess.run, [
        EDGESYNC, "devices", "bundle", "gw-pol", "--project", str(tenant.project_id),
        "--out", str(bundle_dir), "--mqtt-url", "ssl://broker.example:8883",
        "--database-url", database_url], capture_output=True, text=True, timeout=120,
        check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["sync_policy"] == "floor version 2 (attached to the fleet)"
    rep = yaml.safe_load((bundle_dir / "agent.yaml").read_text())["sqlite-replication"]
    assert rep["remote_policy"] is True
    assert rep["table_strategies"] == updated["table_strategies"]

    run("sync-policies", "detach", pid, "--fleet-id", dev["fleet_id"])
    run("sync-policies", "delete", pid)
    _, out, _ = run("sync-policies", "list")
    assert "floor" not in out
