"""What every long-lived MQTT loop (agent, ingest, control publisher) needs to reconnect."""

from __future__ import annotations

import asyncio
import random

__all__ = ["Backoff", "raise_if_cancelling"]


class Backoff:
    """Exponential backoff with jitter: the n-th delay is uniform in [d/2, d],
    d = min(cap, base * 2**n), so a fleet does not reconnect in lockstep."""

    def __init__(self, base: float = 0.5, cap: float = 60.0) -> None:
        self.base, self.cap, self.attempt = base, cap, 0

    def next_delay(self) -> float:
        d = min(self.cap, self.base * 2.0**self.attempt)
        self.attempt = min(self.attempt + 1, 30)
        return d / 2 + random.uniform(0, d / 2)

    def reset(self) -> None:
        self.attempt = 0


def raise_if_cancelling() -> None:
    """Re-raise a cancellation that was swallowed on the way.

    On Python 3.11 ``asyncio.wait_for`` (used by aiomqtt) can drop a cancellation that
    arrives as the awaited operation completes, and aiomqtt may turn one into an
    MqttError while disconnecting: stopping must win over reconnecting.
    """
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
