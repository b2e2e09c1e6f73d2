"""The server's lifecycle is one state (``Server.lifecycle``): its parts exist once
``async with`` has entered it, and using it out of order says what to do instead."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from edgesync import _core
from edgesync.errors import ConfigError, ServerLifecycleError
from edgesync.server import Server, ServerLifecycle, ServerSettings


def test_a_part_read_before_entering_says_how_to_enter(tmp_path: Path) -> None:
    server = Server(ServerSettings(data_dir=tmp_path))
    assert server.lifecycle is ServerLifecycle.NEW
    with pytest.raises(ServerLifecycleError, match=r"^Server.pool: the server is new; use it "
                                                   r"inside `async with Server\(settings\)"):
        _ = server.pool


async def test_a_server_that_failed_to_open_is_closed_and_not_entered_again(
        tmp_path: Path) -> None:
    server = Server(ServerSettings(data_dir=tmp_path, api_port=70000))
    with pytest.raises(ConfigError, match="--api-port"):
        await server.__aenter__()
    assert server.lifecycle is ServerLifecycle.CLOSED
    with pytest.raises(ServerLifecycleError, match="closed; a Server is entered once"):
        await server.__aenter__()


@pytest.mark.parametrize("setting", ["amqp_prefetch", "ingest_lanes", "ingest_group_max"])
async def test_a_count_below_one_is_refused_naming_its_option(tmp_path: Path,
                                                             setting: str) -> None:
    server = Server(ServerSettings(data_dir=tmp_path, **{setting: 0}))
    option = "--" + setting.replace("_", "-")
    with pytest.raises(ConfigError, match=f"^{option}: must be at least 1, not 0"):
        await server.__aenter__()


@pytest.mark.parametrize("seconds", [0.0, 0.05, 31.0, float("nan")])
async def test_a_progress_interval_out_of_range_is_refused(tmp_path: Path,
                                                           seconds: float) -> None:
    server = Server(ServerSettings(data_dir=tmp_path, progress_interval=seconds))
    with pytest.raises(ConfigError, match=r"^--progress-interval: must be 0\.1 to 30 seconds"):
        await server.__aenter__()


async def test_the_progress_interval_sets_the_reporters_rounds(
        database_url: str, mqtt_url: str, tmp_path: Path, unique: str) -> None:
    settings = ServerSettings(database_url=database_url, mqtt_url=mqtt_url, data_dir=tmp_path,
                              client_id=f"worker-{unique}", progress_interval=7.5)
    async with Server(settings) as server:
        assert server.progress.interval == 7.5


async def test_an_open_server_runs_once_and_closes(database_url: str, mqtt_url: str,
                                                  tmp_path: Path, unique: str) -> None:
    settings = ServerSettings(database_url=database_url, mqtt_url=mqtt_url, data_dir=tmp_path,
                              client_id=f"worker-{unique}")
    _core.set_heap_purge_delay(10)  # mimalloc's default, whatever ran before
    async with Server(settings) as server:
        assert server.lifecycle is ServerLifecycle.OPEN
        assert server.api is None and server.database_url == database_url
        run = asyncio.create_task(server.run())
        await server.wait_ready()
        assert server.lifecycle is ServerLifecycle.RUNNING
        # Process hygiene (server._heap): the Rust heap's freed pages go back at once.
        assert _core.heap_purge_delay() == 0
        with pytest.raises(ServerLifecycleError, match="run\\(\\) is going"):
            await server.run()
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        assert server.lifecycle is ServerLifecycle.OPEN
    assert server.lifecycle is ServerLifecycle.CLOSED
