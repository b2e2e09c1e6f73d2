"""``edgesync serve`` worker processes for the scale-out tests (tests/amqp): started with
their output in a log file, waited for by a line of that log, killed or stopped (and
``edgesync agent run`` processes alike: ``command=("agent", "run")``)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path

from kits.e2e_kit import eventually

EDGESYNC = str(Path(sys.executable).with_name("edgesync"))


class Worker:
    def __init__(self, name: str, log: Path, args: list[str],
                 command: tuple[str, ...] = ("serve",)) -> None:
        self.name, self.log, self.args, self.command = name, log, args, command
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self, ready: str) -> None:
        """Start and wait until the log shows ``ready``."""
        env = {**os.environ, "EDGESYNC_LOG_LEVEL": "INFO"}
        with self.log.open("ab") as out:
            self.proc = await asyncio.create_subprocess_exec(
                EDGESYNC, *self.command, *self.args, stdout=out, stderr=out, env=env)

        async def up() -> bool:
            assert self.proc is not None
            assert self.proc.returncode is None, f"{self.name} exited:\n{self.text()}"
            return ready in self.text()

        await eventually(up, 120, f"{self.name}: {ready!r} in its log")

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    async def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        await self.proc.wait()

    async def stop(self) -> int | None:
        """SIGTERM, then SIGKILL when it does not stop; its exit code (None: killed)."""
        if not self.running:
            return None
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return await asyncio.wait_for(self.proc.wait(), 30)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            await self.proc.wait()
            return None
