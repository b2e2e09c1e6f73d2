"""A telemetry table's ``ts_column``, mirrored like any other column, holds the row's
timestamp as the application stored it (it used to be NULL in every row: the agent sent
the timestamp only as the row's ``ts``, which fills ``event_ts``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from kits.e2e_kit import (
    actions,
    app,
    cloud,
    pool_of,
    register,
    target_of,
    ts_rows,
    utc,
    wait_reviews,
    wait_rows,
)
from kits.review_helpers import claim_and_approve

from edgesync.agent import Agent, load_config

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

T0 = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)


async def test_mirrored_ts_column_is_filled(tmp_path: Path, database_url: str, mqtt_url: str,
                                            unique: str) -> None:
    async with cloud(database_url, mqtt_url, tmp_path / "cloud", unique) as server:
        pool = pool_of(server)
        dev = await register(pool, tmp_path, mqtt_url, unique, tag="tscol",
                             telemetry={"samples": "ts"})
        app(dev.db, "CREATE TABLE samples (ts TEXT NOT NULL, x REAL)")
        stamps = [(T0 + timedelta(seconds=i)).isoformat() for i in range(20)]
        async with Agent(load_config(dev.config)) as agent:
            app(dev.db, ("INSERT INTO samples VALUES (?, ?)",
                         [(t, i / 2) for i, t in enumerate(stamps)]))
            await agent.flush()
            queued = await wait_reviews(pool, dev, {"samples"})
            await claim_and_approve(pool, queued["samples"], actions(ts="mirror", x="mirror"))
            table = await target_of(pool, dev, "samples")

            async def cloud_rows() -> list[tuple[object, ...]]:
                return await ts_rows(pool, table, dev, ["ts", "x"])

            expected = [(utc(t), t, i / 2) for i, t in enumerate(stamps)]
            await wait_rows(cloud_rows, expected, "telemetry rows with their ts", limit=15)
