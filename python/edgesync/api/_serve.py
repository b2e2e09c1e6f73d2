"""Serving the API with uvicorn inside ``edgesync serve``'s task group."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Iterator
from typing import NoReturn

import uvicorn
from fastapi import FastAPI

from edgesync.protocol import Healthy, session_loop

__all__ = ["ApiServer", "bind_socket"]

_log = logging.getLogger(__name__)


def bind_socket(host: str, port: int) -> socket.socket:
    """Listen now (port 0: any free port), so the address is known before serving."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


class _Uvicorn(uvicorn.Server):
    # Called once the server listens and its lifespan started: the API loop is up
    # (``edgesync_loop_up{loop="api"}``; it read 0 for ever before).
    on_started: Healthy | None = None

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # The process owner (edgesync._runtime) handles SIGINT/SIGTERM by cancelling us.
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started and self.on_started is not None:
            self.on_started()


class ApiServer:
    def __init__(self, app: FastAPI, sock: socket.socket) -> None:
        self.sock = sock
        host, port = sock.getsockname()[:2]
        self.host, self.port = str(host), int(port)
        self._config = uvicorn.Config(app, log_level="warning", access_log=False,
                                      lifespan="on", timeout_graceful_shutdown=2)
        self._server = _Uvicorn(self._config)
        self._served = False

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def run(self) -> NoReturn:
        """Serve until cancelled, then shut down gracefully (open streams get 2 s).

        Should uvicorn stop or fail on its own, it is logged and started again
        (``session_loop``), listening anew on the same address: it closes its socket
        when it stops."""
        try:
            await session_loop(f"HTTP API on {self.url}", self._serve, logger=_log)
        finally:
            self.sock.close()

    async def _serve(self, healthy: Healthy) -> None:
        if self._served:  # the last uvicorn stopped or failed: a fresh one
            self._server = _Uvicorn(self._config)
            if self.sock.fileno() == -1:
                self.sock = bind_socket(self.host, self.port)
        self._served = True
        server = self._server
        server.on_started = healthy
        task = asyncio.ensure_future(server.serve(sockets=[self.sock]))
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            server.should_exit = True
            # uvicorn gives open connections 2 s. Past 5 s it is stopped hard, and past
            # 10 s left behind: never wait on it without a bound (asyncio.wait_for would,
            # after its timeout, wait for the cancelled server to finish).
            if not await _finished(task, 5):
                server.force_exit = True
                task.cancel()
                if not await _finished(task, 5):
                    _log.error("the HTTP API did not stop within 10 s; leaving it")
            raise


async def _finished(task: asyncio.Future[None], limit: float) -> bool:
    done, _ = await asyncio.wait({task}, timeout=limit)
    if done and not task.cancelled() and (exc := task.exception()) is not None:
        _log.warning("the HTTP API stopped with an error: %r", exc)
    return bool(done)
