"""The project's event stream (``GET …/events/stream``, Server-Sent Events) read in a
thread and handed to the console one event at a time; it reconnects with
``Last-Event-ID`` after a drop, like ``edgesync events watch``."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import httpx
import orjson

from edgesync.client import ApiClientError, ProjectApi

__all__ = ["EventFeed", "sse_blocks"]


def sse_blocks(lines: Iterable[str]) -> Iterator[tuple[str | None, str | None]]:
    """(id, data) of each block of an SSE stream; data None for a block that only moves
    the last event id (the first block, and comments, do not carry data)."""
    event_id: str | None = None
    data: list[str] = []
    for line in lines:
        if not line:
            if data or event_id is not None:
                yield event_id, "\n".join(data) if data else None
            event_id, data = None, []
        elif line.startswith("id:"):
            event_id = line[3:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))


class EventFeed:
    """``start()`` follows the stream in a daemon thread, calling ``deliver(event)`` (or
    ``failed(error)``) from it; ``stop()`` ends it without waiting for the next line."""

    def __init__(self, api: ProjectApi, deliver: Callable[[dict[str, Any]], None],
                 failed: Callable[[ApiClientError], None], *, retry_after: float = 2.0
                 ) -> None:
        self.api = api
        self.deliver = deliver
        self.failed = failed
        self.retry_after = retry_after
        self._stop = threading.Event()
        self._response: httpx.Response | None = None
        self._thread = threading.Thread(target=self._run, name="edgesync-tui-events",
                                        daemon=True)
        self.last_id: str | None = None
        self.connected = threading.Event()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        response = self._response
        if response is not None:
            # Closing a socket does not wake a thread blocked reading it; shutting it down
            # does. Already closed, or closing under the reader: it stops either way.
            stream = response.extensions.get("network_stream")
            sock = stream.get_extra_info("socket") if stream is not None else None
            with contextlib.suppress(OSError):
                if sock is not None:
                    sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(httpx.HTTPError, OSError, RuntimeError):
                response.close()

    def _opened(self, response: httpx.Response) -> None:
        self._response = response
        self.connected.set()
        if self._stop.is_set():
            response.close()

    def _run(self) -> None:
        path = self.api.prefix + "/events/stream"
        while not self._stop.is_set():
            headers = {"Accept": "text/event-stream"}
            if self.last_id is not None:
                headers["Last-Event-ID"] = self.last_id
            try:
                lines = self.api.client.stream_lines(path, headers=headers, opened=self._opened)
                for event_id, data in sse_blocks(lines):
                    if self._stop.is_set():
                        return
                    self.last_id = event_id or self.last_id
                    if data is not None:
                        self.deliver(orjson.loads(data))
            except ApiClientError as exc:
                if self._stop.is_set():
                    return
                self.failed(exc)
            except (httpx.HTTPError, OSError, RuntimeError, ValueError):
                if self._stop.is_set():
                    return  # the response closed under the reader by stop()
            self._response = None
            self._stop.wait(self.retry_after)
