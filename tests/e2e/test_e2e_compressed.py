"""An agent with ``compression: zstd`` syncing to the real ``edgesync serve`` (Mosquitto,
PostgreSQL): every row and telemetry batch travels as a zstd frame, and the cloud ends up
with SQLite's rows exactly, as it does for plain JSON batches (issue 29, point 1)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from kits.e2e_kit import (
    Wire,
    actions,
    app,
    approve,
    cloud,
    pool_of,
    register,
    running_agent,
    target_of,
    ts_rows,
    utc,
    wait_equal,
    wait_reviews,
    wait_rows,
)
from kits.review_helpers import claim_and_approve

from edgesync import _core

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

T0 = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)


async def test_zstd_batches_reach_the_cloud_row_for_row(tmp_path: Path, database_url: str,
                                                        mqtt_url: str, unique: str) -> None:
    async with cloud(database_url, mqtt_url, tmp_path / "cloud", unique) as server:
        pool = pool_of(server)
        dev = await register(pool, tmp_path, mqtt_url, unique, tag="zstd",
                             telemetry={"samples": "ts"}, compression="zstd")
        app(dev.db, "CREATE TABLE device_state (id INTEGER PRIMARY KEY, mode TEXT, sp REAL)",
            "CREATE TABLE samples (ts TEXT NOT NULL, x REAL)")
        stamps = [(T0 + timedelta(seconds=i)).isoformat() for i in range(40)]
        async with Wire(mqtt_url, dev.root, unique) as wire, running_agent(dev):
            app(dev.db, ("INSERT INTO device_state VALUES (?, ?, ?)",
                         [(i, f"mode {i % 4}", i / 4) for i in range(120)]),
                ("INSERT INTO samples VALUES (?, ?)",
                 [(t, i / 2) for i, t in enumerate(stamps)]))
            await approve(pool, dev, "device_state")
            queued = await wait_reviews(pool, dev, {"samples"})
            await claim_and_approve(pool, queued["samples"], actions(ts="mirror", x="mirror"))
            app(dev.db, "UPDATE device_state SET sp = sp + 1 WHERE id % 3 = 0",
                "DELETE FROM device_state WHERE id % 10 = 0")
            await wait_equal(pool, dev, "device_state", ["id", "mode", "sp"])
            table = await target_of(pool, dev, "samples")
            await wait_rows(lambda: ts_rows(pool, table, dev, ["ts", "x"]),
                            [(utc(t), t, i / 2) for i, t in enumerate(stamps)],
                            "telemetry rows", limit=20)
            batches = [p for t, p in wire.messages
                       if t.endswith(("/sync/rows/batch", "/sync/telemetry/batch"))]
        assert batches and all(p.startswith(_core.ZSTD_MAGIC) for p in batches)
