"""Fixtures of the console tests: ``edgesync serve`` in-process (real PostgreSQL and
Mosquitto, its HTTP API on a free port), one per test module; tui_console.py makes a
device and a token per test."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from kits.e2e_kit import cloud

from edgesync.server import Server


@pytest.fixture(scope="module")
async def tui_server(database_url: str, mqtt_url: str, tmp_path_factory: pytest.TempPathFactory
                     ) -> AsyncIterator[Server]:
    unique = uuid.uuid4().hex[:8]
    async with cloud(database_url, mqtt_url, tmp_path_factory.mktemp("cloud"), unique) as s:
        yield s
