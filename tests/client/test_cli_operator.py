"""The operator CLI over a real HTTP API (uvicorn in a thread): a full review, lineage
reset/delete, policy, devices, write-back, and errors with their stable codes."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from kits.api_cli import Cli

from edgesync import cli


async def test_full_review_through_the_cli(run: Cli, tenant, stage, monkeypatch) -> None:
    s = await stage(tenant)
    rid, lid = str(s.review_id), str(s.lineage_id)

    _, out, _ = run("reviews", "list", "--status", "queued")
    header, row = out.splitlines()[:2]
    assert header.split()[:5] == ["ID", "DEVICE", "TABLE", "CLASSIFICATION", "STATUS"]
    assert row.split()[:5] == [rid, "gw-1", "device_state", "ambiguous", "queued"]
    listed = run.json("reviews", "list")
    assert [r["id"] for r in listed["data"]] == [rid] and listed["meta"]["total"] == 1

    _, out, _ = run("reviews", "show", rid)
    assert "status:" in out and "queued" in out
    assert [line.split()[0] for line in out.split("\ncolumns\n")[1].splitlines()[1:4]] == [
        "id", "mode", "setpoint"]

    _, out, _ = run("reviews", "claim", rid)
    assert "in_review" in out

    approved = run.json("reviews", "approve", rid, "--mirror", "mode:hvac",
                        "--ignore", "setpoint")["data"]
    assert (approved["status"], approved["decided_by"]) == ("approved", "admin")
    assert [(a["source_column_name"], a["action"], a.get("mirror_column_name"))
            for a in approved["column_actions"]] == [
        ("id", "mirror", None), ("mode", "mirror", "hvac"), ("setpoint", "ignore", None)]

    _, out, _ = run("lineages", "show", lid)
    assert "bindings" in out and "hvac" in out and "device_state" in out
    _, out, _ = run("lineages", "list")
    assert lid in out and "device_state" in out
    assert run.json("lineages", "reset", lid)["data"] == {"lineage_id": lid,
                                                         "requeued_batches": 0,
                                                         "quarantined_rows": 0}

    monkeypatch.setattr("sys.stdin", _Lines("n\n"))
    code, _, err = run("lineages", "delete", lid, ok=False)
    assert code == 1 and "[y/N]" in err
    assert run.json("lineages", "show", lid)["data"]["id"] == lid
    deleted = run.json("lineages", "delete", lid, "--yes")["data"]
    assert (deleted["id"], deleted["deleted"], deleted["device_will"]) == (lid, True,
                                                                           "resend_table")

    code, out, err = run("lineages", "show", lid, ok=False)
    assert code == 2 and "LINEAGE_NOT_FOUND" in err and out == ""
    code, out, err = run("lineages", "show", lid, "--output", "json", ok=False)
    assert code == 2 and json.loads(out)["error"]["code"] == "LINEAGE_NOT_FOUND"


async def test_stale_decision_and_missing_credentials(run: Cli, tenant, stage,
                                                      capsys) -> None:
    s = await stage(tenant)
    run("reviews", "approve", str(s.review_id))  # claims, then approves
    code, _, err = run("reviews", "reject", str(s.review_id), "--action-version", "1",
                       ok=False)
    assert code == 2 and "HTTP 409 ACTION_VERSION_CONFLICT" in err
    # The console's address given for the API's: told so, not "404 NOT_FOUND: Not Found".
    api_url = run.conn[run.conn.index("--api-url") + 1]
    code = cli.main(["reviews", "list", *run.conn, "--api-url", f"{api_url}/console"])
    err = capsys.readouterr().err
    assert code == 2 and f"at {api_url}/console (drop the trailing /console" in err, err
    assert "must be the API's root" in err
    code = cli.main(["reviews", "list", "--api-url", "http://127.0.0.1:9", "--token", "",
                     "--org-id", str(tenant.org_id), "--project", str(tenant.project_id)])
    assert code == 2 and "--token" in capsys.readouterr().err


async def test_policy_and_devices(run: Cli, tenant) -> None:
    run("policy", "set", "max_pending_rows_per_lineage=50000", "allow_additive_continue=true")
    policy = run.json("policy", "show")["data"]
    assert (policy["max_pending_rows_per_lineage"], policy["allow_additive_continue"]) == (
        50000, True)
    _, out, _ = run("policy", "set", "max_pending_rows_per_lineage=default")
    assert "max_pending_rows_per_lineage:" in out and "100000" in out
    code, _, err = run("policy", "set", "schema_coalescing_mode=sideways", ok=False)
    assert code == 2 and "VALIDATION_FAILED" in err

    added = run.json("devices", "add", "gw-9", "--fleet", "north")["data"]
    assert added["root_topic"] == f"{tenant.slug}/gw-9"
    _, out, _ = run("devices", "list")
    assert "gw-9" in out and "north" in out
    code, _, err = run("devices", "add", "gw-9", ok=False)
    assert code == 2 and "DEVICE_NAME_ALREADY_IN_USE" in err


async def test_write_back_through_the_cli(run: Cli, tenant, stage, tmp_path: Path) -> None:
    rows = tmp_path / "rows.json"
    rows.write_text(json.dumps([{"pk": {"id": 1}, "values": {"mode": "off"}}]))
    device_owned = await stage(tenant)
    run("reviews", "approve", str(device_owned.review_id))
    code, _, err = run("lineages", "write", str(device_owned.lineage_id), "--rows",
                       str(rows), ok=False)
    assert code == 2 and "edge_state_not_cloud_authoritative" in err

    cloud_owned = await stage(tenant, name="gw-2")
    run("reviews", "approve", str(cloud_owned.review_id), "--sync-authority",
        "cloud_authoritative")
    written = run.json("lineages", "write", str(cloud_owned.lineage_id), "--rows",
                       str(rows))["data"]
    assert (written["rows_written"], written["cloud_version"]) == (1, 1)
    uuid.UUID(written["control_id"])
    rows_page = run.json("lineages", "mirror-rows", str(cloud_owned.lineage_id))
    assert {r["id"]: r["mode"] for r in rows_page["data"]}[1] == "off"


class _Lines:
    """A stand-in for stdin that answers the confirmation prompt."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines(keepends=True)

    def readline(self) -> str:
        return self.lines.pop(0) if self.lines else ""
