"""A group's statements look its keys up by index in fleet-sized tables (store.any_of).

Joined with ``unnest`` of a group's 128 keys, PostgreSQL planned a scan of every
lineage (or device) of the fleet: a cost per group that grows with the fleet. Here a
fleet of 20,000 devices and lineages, without statistics (as on a server with
autovacuum off, or before its first analyze), is set up in a transaction that is rolled
back; each statement a group sends is captured with its arguments and explained.
"""

from __future__ import annotations

from typing import Any

import orjson

from edgesync import fleet
from edgesync.fleet import ProjectPolicy
from edgesync.governance import load_state_targets, lock_lineages
from edgesync.governance._lineages import add_staged, set_approved_many
from edgesync.governance._versions import fill_columns_many
from edgesync.ingest._ledger import settle_many

FLEET = 20_000
GROUP = 128  # the group writer's largest group
FLEET_TABLES = {"edge_devices", "edge_table_lineages", "edge_schema_versions",
                "edge_column_bindings"}


def scans(plan: Any) -> set[str]:
    """The relations a plan reads whole."""
    out: set[str] = set()
    if plan.get("Node Type") == "Seq Scan":
        out.add(plan["Relation Name"])
    for child in plan.get("Plans", []):
        out |= scans(child)
    return out


async def test_a_groups_statements_read_no_fleet_table_whole(pool, unique):
    async with pool.acquire() as conn:
        tx = conn.transaction()
        await tx.start()
        try:
            project = await fleet.ensure_project(conn, f"fp-{unique}", f"fp-{unique}")
            await conn.execute(
                "INSERT INTO edge_devices (id, project_id, name) "
                "SELECT gen_random_uuid(), $1, 'fp-' || i FROM generate_series(1, $2) i",
                project, FLEET)
            await conn.execute(
                "INSERT INTO edge_table_lineages (id, project_id, device_id, source_table, "
                "pipeline, status) SELECT gen_random_uuid(), $1, id, 'valves', 'rows', 'active' "
                "FROM edge_devices WHERE project_id = $1", project)
            await conn.execute(
                "INSERT INTO edge_schema_versions (id, lineage_id, schema_hash, classification) "
                "SELECT gen_random_uuid(), l.id, 'h1', 'unknown' FROM edge_table_lineages l "
                "WHERE l.project_id = $1", project)
            await conn.execute(
                "INSERT INTO edge_column_bindings (id, lineage_id, schema_hash, "
                "source_column_name, action, mirror_column_name, target_type) "
                "SELECT gen_random_uuid(), l.id, 'h1', c, 'mirror', c, 'text' "
                "FROM edge_table_lineages l CROSS JOIN unnest(ARRAY['a', 'b', 'c']) AS c "
                "WHERE l.project_id = $1", project)
            devices = await conn.fetch("SELECT id, name FROM edge_devices WHERE project_id = $1 "
                                       "ORDER BY random() LIMIT $2", project, GROUP)
            scopes = [fleet.DeviceScope(d["id"], d["name"], project, None, f"fp-{unique}",
                                        ProjectPolicy()) for d in devices]

            sent: list[tuple[str, tuple[Any, ...]]] = []

            def log(record: Any) -> None:
                sent.append((record.query, tuple(record.args or ())))

            conn.add_query_logger(log)
            lineages = await lock_lineages(conn, [(s, "valves", "rows") for s in scopes])
            ids = [lin.id for lin in lineages.values()]
            assert len(ids) == GROUP  # every one found, none created
            approved = await set_approved_many(conn, [(i, "h1", f"edge_state_fp_{unique}")
                                                      for i in ids])
            await fill_columns_many(conn, ids, ["h1"] * GROUP, [orjson.dumps(
                {"table_name": "valves", "columns": []}).decode()] * GROUP)
            await load_state_targets(conn, [(lin, "h1") for lin in approved.values()])
            await settle_many(conn, [(i, 50) for i in ids], [])
            await add_staged(conn, ids, [50] * GROUP, [1000] * GROUP)
            await fleet.take_control_seqs(conn, {s.device_id: 1 for s in scopes})
            conn.remove_query_logger(log)

            read_whole: dict[str, set[str]] = {}
            for query, args in sent:
                if not any(t in query for t in FLEET_TABLES):
                    continue
                plan = await conn.fetchval(f"EXPLAIN (FORMAT JSON) {query}", *args)
                if isinstance(plan, str):  # (the pool decodes json, a bare connection not)
                    plan = orjson.loads(plan)
                if whole := scans(plan[0]["Plan"]) & FLEET_TABLES:
                    read_whole[query[:120]] = whole
            assert len(sent) >= 7
            assert read_whole == {}
        finally:
            await tx.rollback()


def test_scans_finds_a_nested_seq_scan() -> None:
    plan = {"Node Type": "Update", "Plans": [
        {"Node Type": "Hash Join", "Plans": [
            {"Node Type": "Seq Scan", "Relation Name": "edge_table_lineages"},
            {"Node Type": "Function Scan"}]}]}
    assert scans(plan) == {"edge_table_lineages"}
