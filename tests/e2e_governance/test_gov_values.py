"""REAL values reach the cloud bit for bit, through the state and the telemetry path.

The agent writes a REAL as the shortest text that reads back as the same double (Rust,
``edgesync_core::rowjson``), so values whose 15 significant digits are not enough, like
``101.33333333333333``, travel with 17. Such a value must land in ``double precision``
as the same double, whether the COPY carries it as text or in binary."""

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
    sqlite_rows,
    state_rows,
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
VALUES = [i / 3 for i in range(1, 200)] + [1e-300 / 3, 2.0 ** 0.5, 1 / 7e20, -123456.789e-5]


async def test_real_values_round_trip_exactly(tmp_path: Path, database_url: str,
                                              mqtt_url: str, unique: str) -> None:
    async with cloud(database_url, mqtt_url, tmp_path / "cloud", unique) as server:
        pool = pool_of(server)
        dev = await register(pool, tmp_path, mqtt_url, unique, tag="real",
                             telemetry={"samples": "ts"})
        app(dev.db, "CREATE TABLE m (id INTEGER PRIMARY KEY, x REAL)",
            "CREATE TABLE samples (ts TEXT NOT NULL, x REAL)")
        async with Agent(load_config(dev.config)) as agent:
            app(dev.db, ("INSERT INTO m VALUES (?, ?)", list(enumerate(VALUES))),
                ("INSERT INTO samples VALUES (?, ?)",
                 [((T0 + timedelta(seconds=i)).isoformat(), v) for i, v in enumerate(VALUES)]))
            await agent.flush()
            queued = await wait_reviews(pool, dev, {"m", "samples"})
            await claim_and_approve(pool, queued["m"], None)
            await claim_and_approve(pool, queued["samples"], actions(ts="ignore", x="mirror"))
            m_table = await target_of(pool, dev, "m")
            s_table = await target_of(pool, dev, "samples")

            async def cloud_m() -> list[tuple[object, ...]]:
                return await state_rows(pool, m_table, dev, ["id", "x"], "id")

            async def cloud_samples() -> list[tuple[object, ...]]:
                return await ts_rows(pool, s_table, dev, ["x"])

            expected_m = sqlite_rows(dev.db, "SELECT id, x FROM m ORDER BY id")
            expected_s = [(utc(t), x) for t, x in
                          sqlite_rows(dev.db, "SELECT ts, x FROM samples ORDER BY ts")]
            await wait_rows(cloud_samples, expected_s, "telemetry REAL values", limit=15)
            await wait_rows(cloud_m, expected_m, "state REAL values", limit=15)
