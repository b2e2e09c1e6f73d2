"""``edgesync registry``, ``data-points`` and ``lineages reopen-review`` over a real HTTP
API: a coalesced review from list to mirror, mapped values, reject/abandon, fleet scope."""

from __future__ import annotations

import uuid

import asyncpg
from kits.api_cli import Cli

from edgesync.ingest import Replayer


async def test_registry_review_and_data_points_through_the_cli(
        run: Cli, tenant, stage_registry, pool: asyncpg.Pool) -> None:
    rid, (a, b) = await stage_registry(tenant, "gw-a", "gw-b")

    _, out, _ = run("registry", "reviews", "--status", "queued")
    header, row = out.splitlines()[:2]
    assert header.split()[:5] == ["ID", "SCOPE", "TABLE", "CLASSIFICATION", "STATUS"]
    assert row.split()[:5] == [str(rid), "project", "device_state", "ambiguous", "queued"]
    _, out, _ = run("registry", "review-show", str(rid))
    columns, devices = out.split("\ncolumns\n")[1].split("\ndevices\n")
    assert [line.split()[0] for line in columns.splitlines()[1:4]] == ["id", "mode",
                                                                       "setpoint"]
    assert str(a.device.device_id) in devices and str(b.device.device_id) in devices
    (entry,) = run.json("registry", "list")["data"]
    assert (entry["status"], entry["device_count"]) == ("pending", 2)

    point = run.json("data-points", "create", "setpoint", "--type", "real", "--unit",
                     "degC")["data"]
    _, out, _ = run("data-points", "list")
    assert "setpoint" in out and "real" in out and "degC" in out
    approved = run.json("registry", "approve", str(rid), "--mirror", "mode:hvac",
                        "--map", "setpoint=setpoint")["data"]  # claims, then approves
    table = f"edge_state_p{tenant.project_id.hex[:8]}_device_state"
    assert (approved["status"], approved["decided_by"], approved["target_table"]) == (
        "approved", "admin", table)
    assert [(x["source_column_name"], x["action"], x.get("device_data_point_id"))
            for x in approved["column_actions"]] == [
        ("id", "mirror", None), ("mode", "mirror", None), ("setpoint", "map", point["id"])]
    assert await Replayer(pool).drain_pending(project_id=tenant.project_id) == 4

    _, out, _ = run("registry", "mirrors")
    assert table in out and "project" in out
    mirror = run.json("registry", "mirror-show", table)["data"]
    assert mirror["device_count"] == 2
    _, out, _ = run("registry", "show", entry["id"])
    assert "approved" in out and "\ndevices\n" in out and "column actions" in out

    values = run.json("data-points", "values", point["id"], "--device-id",
                      str(a.device.device_id))
    assert values["meta"]["total"] == 2
    assert sorted(v["value"] for v in values["data"] if v["value"] is not None) == [20.5]
    _, out, _ = run("data-points", "values", point["id"], "--limit", "1")
    assert out.splitlines()[0].split()[:3] == ["TS", "DEVICE", "VALUE"]
    assert "(page 1, 1 of 4;" in out
    code, _, err = run("registry", "approve", str(rid), "--map", "setpoint=nope", ok=False)
    assert code == 2 and "no data point named 'nope'" in err


async def test_reject_abandon_and_conflicts_through_the_cli(run: Cli, tenant,
                                                            stage_registry) -> None:
    rid, _ = await stage_registry(tenant, "gw-n1", mode="fleet", fleet="north")
    fleet = run.json("registry", "reviews")["data"][0]["fleet_id"]
    listed = run.json("registry", "reviews", "--fleet-id", fleet)["data"]
    assert [x["id"] for x in listed] == [str(rid)]
    code, _, err = run("registry", "review-show", str(rid), "--fleet-id", str(uuid.uuid4()),
                       ok=False)
    assert code == 2 and "FLEET_NOT_FOUND" in err

    _, out, _ = run("registry", "claim", str(rid), "--fleet-id", fleet)
    assert "claimed" in out and "in_review" in out
    code, _, err = run("registry", "reject", str(rid), "--action-version", "1", ok=False)
    assert code == 2 and "HTTP 409 ACTION_VERSION_CONFLICT" in err
    rejected = run.json("registry", "reject", str(rid), "--reason", "wrong layout")["data"]
    assert (rejected["status"], rejected["decision_reason"]) == ("rejected", "wrong layout")

    rid2, staged = await stage_registry(tenant, "gw-n2", mode="fleet", fleet="north",
                                        table="valves")
    _, out, _ = run("registry", "abandon", str(rid2), "--reason", "per device")
    assert "abandoned" in out
    reviews = run.json("reviews", "list", "--lineage-id", str(staged[0].lineage_id))["data"]
    assert [r["status"] for r in reviews] == ["queued"]
    code, out, _ = run("registry", "abandon", str(rid2), "--output", "json", ok=False)
    assert code == 2 and '"CONFLICT"' in out


async def test_reopen_review_through_the_cli(run: Cli, tenant, stage) -> None:
    s = await stage(tenant)
    run("reviews", "approve", str(s.review_id), "--defer", "setpoint")
    assert run.json("lineages", "show", str(s.lineage_id))["data"]["pause_reason"] == (
        "deferred_columns")
    _, out, _ = run("lineages", "reopen-review", str(s.lineage_id))
    assert out.startswith("review reopened\n") and "queued" in out
    code, _, err = run("lineages", "reopen-review", str(s.lineage_id), ok=False)
    assert code == 2 and "HTTP 409 CONFLICT" in err
