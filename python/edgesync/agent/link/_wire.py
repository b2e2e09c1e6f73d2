"""What the agent puts on the wire: row and telemetry batches in the configured
``compression``, everything metered by the bandwidth budget (docs/agent.md).

``Wire.send`` publishes controls' acks, status reports and requests: they never wait for
the budget (they are counted, so the rate over everything published holds).
``Wire.send_batch`` publishes a row or telemetry batch: compressed here, at publish time
(the state.db buffer keeps the JSON), then held until the token bucket
(``max_bytes_per_second``) has room. The UTC day's budget (``max_bytes_per_day``) is
asked by the flush (``data_waits``) before each batch: once spent, data waits for the
next UTC day. A batch sent while some budget was left goes whole, so a day can end up
to one batch over.

Bytes are MQTT PUBLISH packets as sent once (fixed header, topic, packet id, payload);
the day's count starts from what ``state.db`` says (read when the agent opens) and the
agent writes the sends back there (``StateStore.add_bytes_sent``: each one at once under
a daily budget, else once a flush), so a restart keeps the day's spending.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from edgesync import _core
from edgesync.agent.link._publisher import MqttLink
from edgesync.protocol import Compression

__all__ = ["Wire", "WireBudget", "encode_batch", "packet_bytes", "utc_day"]

_ZSTD_LEVEL = 3


def utc_day() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d")


def encode_batch(payload: bytes, compression: Compression) -> bytes:
    """A batch's JSON as it goes on the wire: itself, or one zstd frame of it."""
    if compression is Compression.ZSTD:
        return _core.compress_blob(payload, _ZSTD_LEVEL)
    return payload


def packet_bytes(topic: str, payload: bytes) -> int:
    """The size of the QoS 1 PUBLISH packet carrying ``payload`` to ``topic``."""
    remaining = 2 + len(topic.encode()) + 2 + len(payload)
    length_bytes = 1 + (remaining >= 128) + (remaining >= 16_384) + (remaining >= 2_097_152)
    return 1 + length_bytes + remaining


class WireBudget:
    """A token bucket of ``per_second`` bytes (a second's worth of burst) and a UTC
    day's budget of ``per_day`` bytes; 0 leaves either unlimited. The clocks are
    parameters so tests can move time."""

    def __init__(self, per_second: int, per_day: int, *, spent: tuple[str, int] = ("", 0),
                 monotonic: Callable[[], float] = time.monotonic,
                 today: Callable[[], str] = utc_day,
                 sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep) -> None:
        self.per_second = per_second
        self.per_day = per_day
        self._monotonic = monotonic
        self._today = today
        self._sleep = sleep
        self._tokens = float(per_second)
        self._filled_at = monotonic()
        # (day, bytes) as state.db had them at the start; another day starts at 0.
        self._day = today()
        self._spent = spent[1] if spent[0] == self._day else 0

    def _roll(self) -> str:
        day = self._today()
        if day != self._day:
            self._day, self._spent = day, 0
        return day

    @property
    def day(self) -> str:
        """The UTC day the count is of."""
        return self._roll()

    @property
    def spent_today(self) -> int:
        self._roll()
        return self._spent

    @property
    def left_today(self) -> int | None:
        """Bytes left of today's budget; None when there is no daily budget."""
        return max(0, self.per_day - self.spent_today) if self.per_day else None

    def data_waits(self) -> bool:
        """Today's budget is spent: batches wait for the next UTC day."""
        return bool(self.per_day) and self.spent_today >= self.per_day

    def _refill(self) -> None:
        now = self._monotonic()
        self._tokens = min(float(self.per_second),
                           self._tokens + (now - self._filled_at) * self.per_second)
        self._filled_at = now

    async def admit(self, size: int) -> None:
        """Wait until the bucket has room for ``size`` bytes (a packet larger than a
        second's worth waits for a full bucket, then takes it below zero)."""
        if not self.per_second:
            return
        self._refill()
        need = min(float(size), float(self.per_second))
        while self._tokens < need:
            await self._sleep((need - self._tokens) / self.per_second)
            self._refill()

    def spend(self, size: int) -> str:
        """Count ``size`` bytes sent; returns the UTC day they count for."""
        day = self._roll()
        self._spent += size
        if self.per_second:
            self._refill()
            self._tokens -= size
        return day


class Wire:
    """The link, with the batches' encoding and the budget in front of it."""

    def __init__(self, link: MqttLink, budget: WireBudget, compression: Compression,
                 on_sent: Callable[[str, int], Awaitable[None]]) -> None:
        self.link = link
        self.budget = budget
        self.compression = compression
        self._on_sent = on_sent  # (day, bytes): the agent writes it to state.db
        self._unsaved: dict[str, int] = {}  # bytes counted, not yet written

    async def send(self, topic: str, payload: bytes) -> None:
        """A control's ack, a status report, a request: never held by the budget."""
        await self.link.publish(topic, payload)
        await self._spent(packet_bytes(topic, payload))

    async def send_batch(self, topic: str, payload: bytes) -> int:
        """A row or telemetry batch (its JSON), encoded and metered; returns its bytes."""
        wire = encode_batch(payload, self.compression)
        size = packet_bytes(topic, wire)
        await self.budget.admit(size)
        await self.link.publish(topic, wire)
        await self._spent(size)
        return size

    async def _spent(self, size: int) -> None:
        day = self.budget.spend(size)
        self._unsaved[day] = self._unsaved.get(day, 0) + size
        if self.budget.per_day:  # the day's budget must hold across a crash: write now
            await self.save()

    async def save(self) -> None:
        """Write the bytes counted since the last save (without a daily budget the agent
        saves once a flush: one transaction fewer per batch)."""
        while self._unsaved:
            day, size = next(iter(self._unsaved.items()))
            await self._on_sent(day, size)
            del self._unsaved[day]
