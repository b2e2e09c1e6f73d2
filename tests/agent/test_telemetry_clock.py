"""Telemetry and device clocks that jump: rows past the (ts, key) cursor OR with a rowid
above the high-water mark are sent, so nothing is lost and nothing is sent twice."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from test_telemetry import Tele

from edgesync.agent.capture._telemetry import format_ts, parse_ts

T0 = 1777366800  # 2026-04-28T09:00:00Z
HOUR = 3600

SHAPES = {
    "integer_pk": "CREATE TABLE m (id INTEGER PRIMARY KEY, ts {ts}, v INTEGER)",
    "composite_pk": "CREATE TABLE m (site TEXT, id INTEGER, ts {ts}, v INTEGER, "
                    "PRIMARY KEY (site, id))",
    "no_pk": "CREATE TABLE m (id INTEGER, ts {ts}, v INTEGER)",
}


class Device:
    """An application writing readings stamped by its (unreliable) clock."""

    def __init__(self, app: sqlite3.Connection, shape: str, ts_kind: str) -> None:
        self.app, self.shape, self.ts_kind = app, shape, ts_kind
        app.execute(SHAPES[shape].format(ts="TEXT" if ts_kind == "text" else "INTEGER"))
        self.n = 0

    def stamp(self, epoch_s: int) -> object:
        if self.ts_kind == "text":
            return format_ts(epoch_s * 1_000_000)
        return epoch_s * 1000  # epoch milliseconds

    def write(self, clock: int, count: int) -> None:
        """``count`` readings, one per second starting at ``clock``."""
        rows = []
        for i in range(count):
            self.n += 1
            ts = self.stamp(clock + i)
            if self.shape == "composite_pk":
                rows.append(("s", self.n, ts, self.n))
            else:
                rows.append((self.n, ts, self.n))
        marks = ", ".join("?" * len(rows[0]))
        self.app.executemany(f"INSERT INTO m VALUES ({marks})", rows)


@pytest.fixture
def tele(source_db: Path, tmp_path: Path) -> Any:
    opened: list[Tele] = []

    def make(table: str, **kw: Any) -> Tele:
        t = Tele(source_db, tmp_path / "state.db", table, **kw)
        opened.append(t)
        return t

    yield make
    for t in opened:
        t.close()


def check(docs: list[dict[str, Any]], first_seq: int = 1) -> list[int]:
    """The payload rules of every batch; returns the ``v`` of every row, in order."""
    out = []
    for i, d in enumerate(docs):
        assert d["batch_seq"] == first_seq + i
        assert d["row_count"] == len(d["rows"]) > 0
        ts = [parse_ts(r["ts"]) or 0 for r in d["rows"]]
        assert ts == sorted(ts)
        assert (parse_ts(d["cursor_start_ts"]), parse_ts(d["cursor_end_ts"])) == (
            min(ts), max(ts))
        out += [r["fields"]["v"] for r in d["rows"]]
    return out


@pytest.fixture(params=[("integer_pk", "text"), ("composite_pk", "epoch_ms"),
                        ("no_pk", "text")], ids=lambda p: f"{p[0]}-{p[1]}")
def device(request: pytest.FixtureRequest, app: sqlite3.Connection) -> Device:
    shape, ts_kind = request.param
    return Device(app, shape, ts_kind)


def test_clock_set_back_by_an_hour_mid_stream(device: Device, tele: Any) -> None:
    t: Tele = tele("m", lookback=30, from_start=True)
    device.write(T0, 100)
    docs = t.drain()
    device.write(T0 + 100, 50)  # not yet read when the clock is set back
    device.write(T0 + 150 - HOUR, 5000)  # an hour behind the cursor, more than a batch
    docs += t.drain()
    device.write(T0 + 5150 - HOUR, 10)
    docs += t.drain()
    got = check(docs)
    assert sorted(got) == list(range(1, device.n + 1))  # every row, exactly once
    assert t.drain() == []


def test_clock_jumping_forward_then_back(device: Device, tele: Any, source_db: Path,
                                         tmp_path: Path) -> None:
    t: Tele = tele("m", lookback=30, from_start=True)
    device.write(T0, 20)
    docs = t.drain()
    device.write(T0 + 20 + 24 * HOUR, 30)  # NTP glitch: a day ahead; the cursor follows
    docs += t.drain()
    device.write(T0 + 50, 40)  # corrected: a day behind the cursor
    docs += t.drain()
    device.write(T0 + 90 + 24 * HOUR, 5)  # ahead again
    device.write(T0 + 95, 4200)  # back again, before the next read; a batch boundary
    docs += t.drain()
    t.close()
    device.write(T0 + 4295, 7)  # the agent restarts: the rowid mark is in state.db
    t2 = Tele(source_db, tmp_path / "state.db", "m", lookback=30)
    try:
        docs += t2.drain()
        got = check(docs)
        assert sorted(got) == list(range(1, device.n + 1))
        assert t2.drain() == []
    finally:
        t2.close()


def test_existing_rows_stay_unsent_and_new_ones_behind_the_cursor_go(
        app: sqlite3.Connection, tele: Any) -> None:
    app.execute("CREATE TABLE m (id INTEGER PRIMARY KEY, ts INTEGER, v INTEGER)")
    app.executemany("INSERT INTO m VALUES (?, ?, ?)",
                    [(i, (T0 + i) * 1000, -i) for i in range(1, 11)])
    t: Tele = tele("m", lookback=30)  # not from the start: the 10 rows are not sent
    assert t.drain() == []
    app.execute("INSERT INTO m VALUES (11, ?, 11)", ((T0 - HOUR) * 1000,))
    assert check(t.drain()) == [11]


def test_null_and_unreadable_timestamps_do_not_hold_new_rows(app: sqlite3.Connection,
                                                             tele: Any) -> None:
    app.execute("CREATE TABLE m (id INTEGER PRIMARY KEY, ts TEXT, v INTEGER)")
    t: Tele = tele("m", lookback=30, from_start=True)
    app.execute("INSERT INTO m VALUES (1, '2026-04-28T09:00:00Z', 1), (2, NULL, 2), "
                "(3, 'soon', 3), (4, '2026-04-28T08:00:00Z', 4)")
    assert sorted(check(t.drain())) == [1, 4]
    assert t.state.high_water("m") == (True, 4)
    assert t.drain() == []


def test_emptied_table_is_read_from_its_first_row_again(app: sqlite3.Connection,
                                                       tele: Any) -> None:
    """The application empties the table; new rows reuse low rowids and are stamped
    behind the cursor (the clock was set back meanwhile)."""
    app.execute("CREATE TABLE m (ts TEXT, v INTEGER)")  # the rowid is the key
    t: Tele = tele("m", lookback=30, from_start=True)
    app.executemany("INSERT INTO m VALUES (?, ?)",
                    [(format_ts((T0 + i) * 1_000_000), i) for i in range(1, 6)])
    assert sorted(check(t.drain())) == [1, 2, 3, 4, 5]
    app.execute("DELETE FROM m")
    app.executemany("INSERT INTO m VALUES (?, ?)",
                    [(format_ts((T0 - HOUR + i) * 1_000_000), 100 + i) for i in range(3)])
    assert sorted(check(t.drain(), first_seq=2)) == [100, 101, 102]
    assert t.drain() == []
