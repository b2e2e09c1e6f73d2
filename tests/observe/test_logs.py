"""Operator logs: the JSON line shape (``--log-format json`` / EDGESYNC_LOG_FORMAT),
quiet libraries, the rate-limited WARNING for unknown devices, the INFO lines of
lifecycle events and the throughput summary."""

from __future__ import annotations

import logging
import subprocess
import sys
from typing import Any

import asyncpg
import orjson
import pytest
from kits.review_helpers import approve

from edgesync import fleet
from edgesync.cli import _parser
from edgesync.ingest import IngestPipeline, OutcomeStatus
from edgesync.ingest._unknown import UnknownDevices
from edgesync.observe._event_log import EventLog
from edgesync.observe._summary import ThroughputLog

_SCRIPT = """
import logging
from edgesync._logging import configure_logging
configure_logging("INFO", "json")
log = logging.getLogger("edgesync.test")
log.info("hello %s", "world", extra={"topic": "p/d/sync/rows/batch"})
try:
    1 / 0
except ZeroDivisionError:
    log.exception("it failed")
logging.getLogger("httpx").info("HTTP Request: GET http://x 200")
"""


def test_json_lines_have_a_fixed_shape() -> None:
    out = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True,
                         check=True, timeout=60)
    lines = [orjson.loads(line) for line in out.stderr.splitlines()]
    assert len(lines) == 2  # the httpx request line is hidden at INFO
    first, second = lines
    assert set(first) == {"ts", "level", "logger", "message", "topic"}
    assert first["level"] == "INFO" and first["logger"] == "edgesync.test"
    assert first["message"] == "hello world" and first["topic"] == "p/d/sync/rows/batch"
    assert first["ts"].endswith("+00:00")
    assert second["level"] == "ERROR" and second["message"] == "it failed"
    assert second["exc_info"].startswith("Traceback") and "ZeroDivisionError" in \
        second["exc_info"]


def test_the_log_format_comes_from_the_option_or_the_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert _parser().parse_args(["demo"]).log_format == "text"
    assert _parser().parse_args(["--log-format", "json", "demo"]).log_format == "json"
    monkeypatch.setenv("EDGESYNC_LOG_FORMAT", "json")
    assert _parser().parse_args(["demo"]).log_format == "json"


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno == logging.WARNING and r.name == "edgesync.ingest"]


async def test_unknown_devices_get_one_warning_a_minute_naming_topic_and_fix(
        pool: asyncpg.Pool, batches: Any, unique: str,
        caplog: pytest.LogCaptureFixture) -> None:
    async with pool.acquire() as conn:
        scope = await fleet.add_device(conn, project=f"u-{unique}", name=f"d-{unique}",
                                       topic_slug=f"u-{unique}")
    pipe = IngestPipeline(pool)
    f = batches()
    payload = f.payload(f.rows(("insert", {"id": 1, "mode": "a", "setpoint": 1.0})))
    stranger = f"u-{unique}/stranger/sync/rows/batch"
    with caplog.at_level(logging.WARNING, logger="edgesync.ingest"):
        for _ in range(3):
            out = await pipe.handle(stranger, payload)
            assert out.code == "unknown_device"
        (line,) = warnings_of(caplog)
        assert line == (f"unknown device: dropped 1 message(s) on {stranger}: project "
                        f"'u-{unique}' (topic slug 'u-{unique}') has no device 'stranger': "
                        f"register it (edgesync devices add stranger --project u-{unique}) "
                        "or fix the agent's connection.device_id")
        caplog.clear()
        wrong_slug = f"nope-{unique}/{scope.device_name}/sync/rows/batch"
        await pipe.handle(wrong_slug, payload)
        (line,) = warnings_of(caplog)
        assert line.startswith(f"unknown device: dropped 1 message(s) on {wrong_slug}: no "
                               f"project has topic slug 'nope-{unique}': set the agent's "
                               "connection.root_topic")
        # Once the minute is over, the next line counts what was dropped meanwhile.
        caplog.clear()
        pipe._unknown = limiter = UnknownDevices(pool, interval=3600)
        for _ in range(3):
            await pipe.handle(stranger, payload)
        limiter._interval = 0
        await pipe.handle(stranger, payload)
        assert [w.split(" on ")[0] for w in warnings_of(caplog)] == [
            "unknown device: dropped 1 message(s)", "unknown device: dropped 3 message(s)"]


async def test_lifecycle_events_and_throughput_are_logged_at_info(
        pool: asyncpg.Pool, batches: Any, unique: str,
        caplog: pytest.LogCaptureFixture) -> None:
    events = EventLog(pool)
    await events.round()  # the start: what happened before is not logged
    async with pool.acquire() as conn:
        scope = await fleet.add_device(conn, project=f"l-{unique}", name=f"d-{unique}",
                                       topic_slug=f"l-{unique}")
    pipe = IngestPipeline(pool)
    summary = ThroughputLog(pipe.metrics)
    assert summary.summary() is None  # nothing received: no line
    f = batches()
    out = await pipe.handle(f"{scope.root_topic}/sync/rows/batch", f.payload(f.rows(
        ("insert", {"id": 1, "mode": "a", "setpoint": 1.0}))))
    assert out.status is OutcomeStatus.STAGED
    await pipe.handle(f"{scope.root_topic}/sync/rows/batch", b"not json")
    with caplog.at_level(logging.INFO, logger="edgesync.events"):
        await events.round()
        await approve(pool, out.lineage_id)
        await events.round()
    lines = [r.getMessage() for r in caplog.records if r.name == "edgesync.events"]
    device = scope.device_name
    assert lines[0] == f"lineage created: rows 'device_state' of {device} ({out.lineage_id})"

    def index(prefix: str) -> int:
        return next(i for i, line in enumerate(lines) if line.startswith(prefix))

    opened = index(f"schema review opened: 'device_state' of {device} (review_id=")
    paused = index(f"lineage paused: 'device_state' of {device} (reason=schema_review")
    approved = index(f"schema review approved: 'device_state' of {device} (")
    assert 0 < opened < approved and 0 < paused < approved
    assert lines[approved + 1:] and f"replay scheduled: 'device_state' of {device}, 1 staged " \
        f"row(s) (lineage {out.lineage_id})" in lines[approved:]
    line = summary.summary()
    assert line is not None
    assert line.startswith("ingest last ")
    assert ": 2 message(s) (" in line
    assert "/s): 1 staged, 1 rejected; 0 row(s) written; 2 group(s) of 1.0 on average; " \
           "0 in flight" in line
