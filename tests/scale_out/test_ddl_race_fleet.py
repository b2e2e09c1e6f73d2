"""Issue 25 as a user met it: a coalesced approval's replay racing the first batches of a
whole fleet, on two ``edgesync serve`` workers sharing the subscription.

1,000 devices of one project with project coalescing; device 0 sends its first row and
telemetry batches (staged: the registry has not seen those schemas), the registry
reviews are approved, and at that moment the other 999 devices send their first row
batch and their first telemetry batch of 50 rows each. The replay of device 0's batches
and the two workers' live groups all need the same targets and the same day partition.
Every batch is written exactly once, nothing is staged ``materialization_failed`` or
rejected, and neither worker logs an ERROR.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from kits.e2e_kit import eventually
from kits.review_helpers import approve_registry
from kits.telemetry_payloads import Telemetry
from scale_kit import Worker

from edgesync import fleet
from edgesync.materialize import quote_ident
from edgesync.protocol import mqtt_client, parse_broker_url

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.once, pytest.mark.timeout(420)]

DEVICES = 1000
ROWS = 50
# A day no earlier run wrote: its partition does not exist until these batches come.
DAY = datetime.now(UTC).replace(hour=6, minute=0, second=0, microsecond=0) + timedelta(days=2)


def first_batches(rows: Any, i: int, scope: fleet.DeviceScope) -> list[tuple[str, bytes]]:
    state = rows.payload(rows.rows(*[("insert", {"id": k, "mode": f"d{i}", "setpoint": k / 2})
                                     for k in range(ROWS)]))
    samples = Telemetry().samples(*[(DAY + timedelta(seconds=i * ROWS + k), float(k))
                                    for k in range(ROWS)])
    return [(f"{scope.root_topic}/sync/rows/batch", state),
            (f"{scope.root_topic}/sync/telemetry/batch", samples)]


async def test_a_fleets_first_batches_race_a_coalesced_approvals_replay(
        tmp_path: Path, pool: asyncpg.Pool, database_url: str, private_mqtt: str,
        unique: str, batches: Callable[..., Any]) -> None:
    async with pool.acquire() as conn:
        scopes = [await fleet.add_device(conn, project=f"race-{unique}",
                                         name=f"d{i:04}-{unique}", topic_slug=f"race-{unique}")
                  for i in range(DEVICES)]
        project_id = scopes[0].project_id
        await conn.execute("UPDATE edge_projects SET policy = policy || $2 WHERE id = $1",
                           project_id, {"schema_coalescing_mode": "project"})
    devices = [s.device_id for s in scopes]
    messages = [first_batches(batches(), i, s) for i, s in enumerate(scopes)]
    workers = [Worker(f"w{n}", tmp_path / f"w{n}.log", [
        "--database-url", database_url, "--mqtt-url", private_mqtt,
        "--shared-group", f"g-{unique}", "--client-id", f"w{n}-{unique}",
        "--api-port", "0", "--data-dir", str(tmp_path / f"w{n}")]) for n in (1, 2)]
    try:
        for w in workers:
            await w.start("ingest subscribed")
        async with mqtt_client(parse_broker_url(private_mqtt), identifier=f"fleet-{unique}",
                               clean_session=True) as client:
            for topic, payload in messages[0]:
                await client.publish(topic, payload, qos=1)

            async def both_staged() -> bool:
                return await pool.fetchval(
                    "SELECT count(*) FROM edge_staged_rows WHERE device_id = $1",
                    devices[0]) == 2

            await eventually(both_staged, 60, "device 0's first batches staged for review")
            # The approval (its replay NOTIFYed to the workers) and the fleet, at once.
            approving = asyncio.ensure_future(approve_registry(pool, project_id))
            for batch in messages[1:]:
                for topic, payload in batch:
                    await client.publish(topic, payload, qos=1)
            assert await approving == 2

        async def targets() -> list[str]:
            return [r["target_table"] for r in await pool.fetch(
                "SELECT DISTINCT target_table FROM edge_table_lineages WHERE project_id = $1 "
                "AND target_table IS NOT NULL ORDER BY 1", project_id)]

        async def all_written() -> bool:
            tables = await targets()
            if len(tables) != 2:
                return False
            counts = [await pool.fetchval(
                f"SELECT count(*) FROM {quote_ident(t)} WHERE device_id = ANY($1)", devices)
                for t in tables]
            return counts == [DEVICES * ROWS] * 2

        await eventually(all_written, 240, f"{DEVICES * ROWS} rows in each target")
        ledger = dict(await pool.fetch(
            "SELECT outcome, count(*) FROM edge_export_segments WHERE device_id = ANY($1) "
            "GROUP BY 1", devices))
        # Batches that came before the approval committed were staged, then replayed
        # (how many depends on the timing); none rejected, each batch once.
        assert set(ledger) <= {"materialized", "staged"}, ledger
        assert sum(ledger.values()) == 2 * DEVICES, ledger
        assert await pool.fetchval(
            "SELECT count(DISTINCT batch_id) FROM edge_export_segments "
            "WHERE device_id = ANY($1)", devices) == 2 * DEVICES
        assert await pool.fetchval(
            "SELECT count(*) FROM edge_staged_rows WHERE device_id = ANY($1)", devices) == 0
        # Telemetry rows are appended without a per-row key: a doubled batch would show.
        for table in await targets():
            assert await pool.fetchval(
                f"SELECT count(*) FROM (SELECT DISTINCT * FROM {quote_ident(table)} "
                "WHERE device_id = ANY($1)) d", devices) == DEVICES * ROWS
    finally:
        for w in workers:
            await w.stop()
    errors = [line for w in workers for line in w.text().splitlines() if " ERROR " in line]
    assert not errors, "\n".join(errors[:20])
