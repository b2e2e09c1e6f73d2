"""Where one batch's time goes inside the worker (``edgesync serve --trace-batches FILE``).

A diagnosis aid, off by default: for each batch message it records, on the machine's
monotonic clock (``CLOCK_MONOTONIC``, shared by every process of the host, so a load
generator on the same machine can line its publish times up with these):

* ``received``: the consumer took the message off the connection;
* ``submitted``: the group writer queued it (device and topic resolved);
* ``grouped``: a leader took it into a group;
* ``written``: its group's statements ran (decoding, the ledger rows, the rows copied
  into staging or into a telemetry target), but not the group's tail: the state upserts
  from staging and the lineage counters travel with the ``COMMIT`` in one round trip
  (``store.committing``);
* ``committed``: that tail and the ``COMMIT`` returned (the WAL flushed);
* ``acked``: the consumer acknowledged it to the broker.

One JSON line per batch (``batch_id``, the stamps, ``group`` = its group's size) is
appended to the file when the message is acknowledged. The stamps travel with the
message's task in a context variable: the consumer starts them, the group writer fills
them in, and neither passes anything to the other for it.
"""

from __future__ import annotations

import contextvars
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import orjson

__all__ = ["BatchStamps", "BatchTrace", "current_stamps"]


@dataclass(slots=True)
class BatchStamps:
    received: float
    submitted: float = 0.0
    grouped: float = 0.0
    written: float = 0.0
    committed: float = 0.0
    group: int = 0
    batch_id: str | None = None


_CURRENT: contextvars.ContextVar[BatchStamps | None] = contextvars.ContextVar(
    "edgesync_batch_stamps", default=None)


def current_stamps() -> BatchStamps | None:
    """The stamps of the message this task handles, when batches are traced."""
    return _CURRENT.get()


class BatchTrace:
    """Appends each traced batch's stamps to a file (buffered: read it once the worker
    stopped, or after ``flush``)."""

    # Lines kept before a write: a traced run writes thousands of batches a second.
    _FLUSH_EVERY = 512

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: IO[bytes] = path.open("ab")
        self._lines: list[bytes] = []

    def begin(self) -> BatchStamps:
        """Start the stamps of the message the calling task handles (its own context)."""
        stamps = BatchStamps(time.monotonic())
        _CURRENT.set(stamps)
        return stamps

    def end(self, stamps: BatchStamps) -> None:
        """The message was acknowledged: its line, if it was a batch."""
        if stamps.batch_id is None:
            return
        self._lines.append(orjson.dumps({
            "batch_id": stamps.batch_id, "received": stamps.received,
            "submitted": stamps.submitted, "grouped": stamps.grouped,
            "written": stamps.written, "committed": stamps.committed,
            "acked": time.monotonic(), "group": stamps.group}) + b"\n")
        if len(self._lines) >= self._FLUSH_EVERY:
            self.flush()

    def flush(self) -> None:
        self._file.write(b"".join(self._lines))
        self._file.flush()
        self._lines.clear()

    def close(self) -> None:
        self.flush()
        self._file.close()
