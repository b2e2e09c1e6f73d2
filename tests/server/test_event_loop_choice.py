"""The suite runs on the default loop and, with EDGESYNC_TEST_UVLOOP=1, on uvloop."""

from __future__ import annotations

import asyncio
import os


async def test_the_requested_event_loop_is_in_use() -> None:
    module = type(asyncio.get_running_loop()).__module__
    if os.environ.get("EDGESYNC_TEST_UVLOOP") == "1":
        assert module.startswith("uvloop")
    else:
        assert module.startswith("asyncio")
