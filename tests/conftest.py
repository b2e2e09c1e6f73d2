"""Shared fixtures: a fresh PostgreSQL database per test session, the broker URL,
and builders for device payloads.

``EDGESYNC_TEST_DATABASE_URL`` / ``EDGESYNC_TEST_MQTT_URL`` choose the servers; by
default the local PostgreSQL (127.0.0.1:5432) and Mosquitto (127.0.0.1:1883).
A missing server fails the run: these tests never skip for lack of a service.

This file is loaded for every test, also in CI's agent-only virtualenv (the wheel with no
extras, where only tests/agent runs): at module level it imports nothing of the cloud side.
The database fixtures import asyncpg and ``edgesync.store`` when a test asks for them.
"""

from __future__ import annotations

import asyncio
import gc
import inspect
import io
import os
import shutil
import socket
import sys
import tempfile
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import pytest

from edgesync import _core
from edgesync.protocol import parse_broker_url, uuid7

if TYPE_CHECKING:
    import asyncpg

BASE_DB = os.environ.get("EDGESYNC_TEST_DATABASE_URL",
                         "postgresql://postgres@127.0.0.1:5432/postgres")
MQTT_URL = os.environ.get("EDGESYNC_TEST_MQTT_URL", "mqtt://127.0.0.1:1883")


def pytest_asyncio_loop_factories(config: pytest.Config, item: pytest.Item
                                  ) -> dict[str, Callable[[], asyncio.AbstractEventLoop]]:
    """``EDGESYNC_TEST_UVLOOP=1`` runs the whole suite on uvloop."""
    if os.environ.get("EDGESYNC_TEST_UVLOOP") == "1":
        import uvloop

        return {"uvloop": uvloop.new_event_loop}
    return {"asyncio": asyncio.new_event_loop}


def _uses_async_fixture(metafunc: pytest.Metafunc) -> bool:
    return any(inspect.iscoroutinefunction(d.func) or inspect.isasyncgenfunction(d.func)
               for name in metafunc.fixturenames
               for d in metafunc._arg2fixturedefs.get(name, ()))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A synchronous test that uses async fixtures (``pool``, ``database_url``) runs on
    the same session loop as the async tests. pytest-asyncio parametrizes only async tests
    with the loop factory; a sync test would request the session-scoped factory with no
    parameter, so pytest would tear down the session loop and every async session fixture
    set up on it, and a fixture resolved a moment before (``database_url`` under ``pool``)
    is gone by the time it is used: "The fixture value for ... is not available"."""
    # pytest-asyncio's own (auto mode marks async tests, also those wrapped by hypothesis).
    if metafunc.definition.get_closest_marker("asyncio") is not None:
        return
    if not _uses_async_fixture(metafunc):
        return
    factories = pytest_asyncio_loop_factories(metafunc.config, metafunc.definition)
    metafunc.fixturenames.append("_asyncio_loop_factory")
    metafunc.parametrize("_asyncio_loop_factory", list(factories.values()),
                         ids=[pytest.HIDDEN_PARAM] * len(factories), indirect=True,
                         scope="session")


def _await_chain(task: asyncio.Task[Any]) -> list[str]:
    """Where a task waits, outermost first: each coroutine it is awaiting in turn
    (``Task.print_stack`` shows only the outermost one)."""
    lines, obj = [], task.get_coro()
    while obj is not None:
        frame = getattr(obj, "cr_frame", None) or getattr(obj, "ag_frame", None) \
            or getattr(obj, "gi_frame", None)
        if frame is None:
            lines.append(f"    awaiting {obj!r:.160}")
            break
        lines.append(f"    {frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}")
        obj = getattr(obj, "cr_await", None) or getattr(obj, "ag_await", None) \
            or getattr(obj, "gi_yieldfrom", None)
    return lines


def _dump_tasks(nodeid: str) -> None:
    """What every pending asyncio task awaits: printed shortly before pytest-timeout
    stops a hung test, whose own report shows threads only."""
    out = io.StringIO()
    print(f"\n==== asyncio tasks still pending in {nodeid}", file=out)
    for task in [o for o in gc.get_objects() if isinstance(o, asyncio.Task)]:
        if not task.done():
            print(f"-- {task.get_name()}: {task!r:.200}", file=out)
            print("\n".join(_await_chain(task)), file=out)
    sys.__stderr__.write(out.getvalue())


def _timeout_of(item: pytest.Item) -> float:
    """The limit pytest-timeout applies to this test: its marker, else the option/ini."""
    marker = item.get_closest_marker("timeout")
    if marker is not None:
        value = marker.kwargs.get("timeout", marker.args[0] if marker.args else None)
        if value is not None:
            return float(value)
    return float(item.config.getoption("timeout", None) or item.config.getini("timeout") or 0)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None
                            ) -> Generator[None, Any, Any]:
    # Timed like pytest-timeout (setup, call and teardown), and due just before it.
    limit = _timeout_of(item)
    watchdog = None
    if limit > 0:
        watchdog = threading.Timer(limit * 0.9, _dump_tasks, args=(item.nodeid,))
        watchdog.daemon = True
        watchdog.start()
    try:
        return (yield)
    finally:
        if watchdog is not None:
            watchdog.cancel()


def _with_db(url: str, name: str) -> str:
    head, _, query = url.partition("?")
    base = head.rsplit("/", 1)[0]
    return f"{base}/{name}" + (f"?{query}" if query else "")


@pytest.fixture(scope="session")
async def database_url() -> AsyncIterator[str]:
    import asyncpg

    name = f"edgesync_test_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    try:
        admin = await asyncpg.connect(BASE_DB)
    except (OSError, asyncpg.PostgresError) as exc:
        pytest.fail(f"PostgreSQL for tests is not reachable at {BASE_DB}: {exc}")
    await admin.execute(f'CREATE DATABASE "{name}"')
    await admin.close()
    yield _with_db(BASE_DB, name)
    admin = await asyncpg.connect(BASE_DB)
    await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    await admin.close()


@pytest.fixture(scope="session")
async def pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    from edgesync.store import create_pool, migrate

    p = await create_pool(database_url, max_size=8)
    async with p.acquire() as conn:
        await migrate(conn)
    yield p
    await p.close()


@pytest.fixture(scope="session")
def mqtt_url() -> str:
    url = parse_broker_url(MQTT_URL)
    try:
        socket.create_connection((url.host, url.port), timeout=5).close()
    except OSError as exc:
        pytest.fail(f"MQTT broker for tests is not reachable at {MQTT_URL}: {exc}")
    return MQTT_URL


@pytest.fixture
def embedded_dir() -> Iterator[Path]:
    """A directory the embedded PostgreSQL (which runs as its own system user when we are
    root) can reach. pytest keeps ``/tmp/pytest-of-<user>`` private (0700) and re-asserts
    that whenever a pytest session starts, so the server's data must live elsewhere."""
    path = Path(tempfile.mkdtemp(prefix="edgesync-test-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def unique() -> str:
    return uuid.uuid4().hex[:8]




COLUMNS = [("id", "INTEGER", 1, True), ("mode", "TEXT", 0, True), ("setpoint", "REAL", 0, False)]


class BatchFactory:
    """Builds ``sync/rows/batch`` payloads the way the agent does."""

    def __init__(self, table: str = "device_state",
                 columns: list[tuple[str, str, int, bool]] | None = None) -> None:
        self.table = table
        self.epoch = uuid7()
        self.seq = 0
        self.set_columns(columns or COLUMNS)

    def set_columns(self, columns: list[tuple[str, str, int, bool]]) -> None:
        self.columns = columns
        self.schema_hash, canonical = _core.schema_fingerprint(self.table, columns)
        self.schema_columns = orjson.loads(canonical)

    def rows(self, *ops: tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
        pk_names = [c[0] for c in self.columns if c[2]]
        out = []
        for op, row in ops:
            self.seq += 1
            out.append({"commit_seq": self.seq, "op": op,
                        "pk": {k: row[k] for k in pk_names},
                        "row": None if op == "delete" else row})
        return out

    def payload(self, rows: list[dict[str, Any]], *, with_schema: bool = True,
                **override: Any) -> bytes:
        doc: dict[str, Any] = {
            "format_version": 1, "capture_strategy": "sqlite_row_batch_v1",
            "batch_id": uuid7(), "journal_epoch": self.epoch, "source_table": self.table,
            "schema_hash": self.schema_hash,
            "first_commit_seq": min(r["commit_seq"] for r in rows),
            "last_commit_seq": max(r["commit_seq"] for r in rows), "rows": rows,
        }
        if with_schema:
            doc["schema_columns"] = self.schema_columns
        doc.update(override)
        return orjson.dumps(doc)


@pytest.fixture
def batches() -> Iterator[Callable[..., BatchFactory]]:
    yield BatchFactory
