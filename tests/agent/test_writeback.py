"""``state_write`` controls: the cloud's rows land in SQLite without being journaled back,
and later device changes of those keys carry ``lkcv``."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from agent_helpers import eventually, make_config, next_message, observer, send_control

from edgesync.agent import Agent


async def test_state_write_is_applied_not_journaled_and_lkcv_follows(
        app: sqlite3.Connection, source_db: Path, tmp_path: Path, device_id: str) -> None:
    app.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, mode TEXT, data BLOB)")
    cfg = make_config(device_id, source_db, tmp_path)
    root = cfg.connection.root_topic
    async with observer(device_id) as obs, Agent(cfg) as agent:
        await obs.subscribe(f"{root}/sync/#", qos=1)
        app.execute("INSERT INTO t VALUES (1, 'auto', NULL)")
        assert await agent.flush() == 1
        await next_message(obs, f"{root}/sync/rows/batch")
        top = app.execute("SELECT max(commit_seq) FROM __edgesync_journal").fetchone()[0]
        await send_control(obs, root, {
            "control_id": "w1", "control_kind": "state_write", "source_table": "t",
            "rows": [{"pk": {"id": 1}, "values": {"mode": "eco", "data": {"$blob": "cafe"}},
                      "cloud_version": 7},
                     {"pk": {"id": 2}, "values": {"mode": "new"}, "cloud_version": 7}]})
        assert (await next_message(obs, f"{root}/sync/ingest/ack"))["control_id"] == "w1"
        await eventually(lambda: app.execute("SELECT count(*) FROM t").fetchone() == (2,))
        assert app.execute("SELECT id, mode, data FROM t ORDER BY id").fetchall() == [
            (1, "eco", b"\xca\xfe"), (2, "new", None)]
        # the cloud's own write is not a device change
        assert app.execute("SELECT max(commit_seq), count(*) FROM __edgesync_journal "
                           "WHERE commit_seq > ?", (top,)).fetchone() == (None, 0)
        assert await agent.flush() == 0
        app.execute("UPDATE t SET mode = 'off' WHERE id = 1")
        app.execute("INSERT INTO t VALUES (3, 'device', NULL)")
        assert await agent.flush() == 2
        batch = await next_message(obs, f"{root}/sync/rows/batch")
        assert [(r["pk"]["id"], r.get("lkcv")) for r in batch["rows"]] == [(1, 7), (3, None)]
        assert [c for c in batch["rows"][0]] == ["commit_seq", "op", "pk", "row", "lkcv"]
