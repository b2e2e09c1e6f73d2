"""Background loops that survive anything but their own cancellation.

Every long-lived loop of the worker and the agent has one of three shapes, each a
coroutine that never returns (run it as a task; cancel the task to stop it)::

    # An MQTT client: connect, run until the connection is lost, connect again.
    await session_loop("control publisher", self._session)

    async def _session(self, healthy: Healthy) -> None:
        async with mqtt_client(...) as client:
            await client.subscribe(...)
            healthy()   # up: resets the backoff (and raises if a stop was swallowed meanwhile)
            async for message in client.messages:
                ...

    # A periodic job: a round, then ``interval`` (or until ``wake`` is set).
    await periodic_loop("backpressure sweep", self.sweep, interval=2.0)

    # LISTEN-or-poll: a round at start, on each NOTIFY on ``channel``, on ``wake`` and at
    # least every ``poll`` seconds; the LISTEN connection is held from ``pool``.
    await listen_loop("replay", pool, REPLAY_CHANNEL, self.drain_pending, poll=2.0)

The rules, the same for every shape:

* **Cancellation wins.** Cancelling the task stops the loop at once, including the
  Python 3.11 cases where a cancellation was swallowed on the way (``asyncio.wait_for``
  inside aiomqtt returning a result that came in the same turn, aiomqtt turning it into
  an ``MqttError`` while disconnecting): the loop checks ``Task.cancelling()`` after
  every round, session and failure, and never starts a wait while it is set. Waits use
  ``asyncio.timeout``, never ``wait_for`` (which loses a cancellation that comes as the
  wake-up does).
* **Anything else is retried.** Any ``Exception`` out of a round or a session (a lost
  database or broker connection, ``asyncpg.InternalClientError`` after a restart, a bug)
  and a ``CancelledError`` that is not the task's own are logged — one WARNING line
  ``"<name>: <ErrorType>: <message>; retrying in 1.2s"`` ("reconnecting" for sessions),
  the traceback at DEBUG, and at WARNING too on the third failure in a row — then
  retried after the next ``Backoff`` delay (by default 0.25 to 0.5 s first, doubling up
  to 30 to 60 s). Each shape takes ``backoff=`` (a ``Backoff`` of its own, e.g. tiny in
  tests) and ``logger=`` (the caller's module logger, so the lines carry its name).
* **Success resets the backoff**: a round that returns, or a session that calls its
  ``healthy()``; an INFO line says when a loop recovered after failures.
* In ``listen_loop`` a failed round or a lost LISTEN connection (seen through asyncpg's
  termination listener: a lost pool connection is detached from its proxy at once, so
  nothing may be called on it) gives the connection back and takes a new one from the
  pool after the backoff; the first round on the new one catches up with what was
  notified meanwhile.

* **Liveness is readable from outside.** Each loop records its state (``starting``
  until its first success, ``up``, ``retrying`` after a failure, with the error) under
  the task that runs it; ``loop_state(task)`` reads it (``/readyz`` of ``edgesync
  serve``). One table for every loop, weakly keyed: a finished task's entry goes with it.

Rounds should be idempotent and bounded: a round that failed half-way is simply run
again. ``raise_if_cancelling()`` is still for the seams that *start a wait* on behalf of
a caller (``publish()`` waiting for a connection), not for loops.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NoReturn

from edgesync.errors import StoreError
from edgesync.protocol._reconnect import Backoff, raise_if_cancelling

if TYPE_CHECKING:
    import asyncpg

__all__ = ["Healthy", "LoopState", "LoopStatus", "listen_loop", "loop_state", "periodic_loop",
           "session_loop"]

_log = logging.getLogger(__name__)

Healthy = Callable[[], None]
"""Called by a session once it is up (connected, subscribed): resets the backoff, and
raises ``CancelledError`` when a stop was swallowed while connecting or subscribing
(so the session does not start waiting for messages of a stopped loop)."""

# The failure in a row whose WARNING carries the traceback (once per streak): a
# lasting failure is worth one traceback at the default level, a blip is not.
_TRACEBACK_AT = 3


class LoopStatus(enum.StrEnum):
    STARTING = "starting"  # no round or session has succeeded yet
    UP = "up"  # the last round returned / the session is up
    RETRYING = "retrying"  # the last attempt failed; waiting for the next one


@dataclass(slots=True)
class LoopState:
    """What a loop last did; ``since`` is a ``time.time()`` of the last change."""

    name: str
    status: LoopStatus
    since: float
    failures: int = 0  # in a row
    last_error: str | None = None


# One table for every loop of the process, keyed by the task running it (a loop runs
# in its caller's task), so two servers in one process never share an entry.
_STATES: weakref.WeakKeyDictionary[asyncio.Task[object], LoopState] = \
    weakref.WeakKeyDictionary()


def loop_state(task: asyncio.Task[object]) -> LoopState | None:
    """The state of the loop ``task`` runs (None: it has not started one)."""
    return _STATES.get(task)


def _cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class _Attempts:
    """Failure bookkeeping of one loop: backoff, logging, recovery."""

    def __init__(self, name: str, backoff: Backoff | None, logger: logging.Logger | None,
                 verb: str) -> None:
        self.name = name
        self.backoff = backoff or Backoff()
        self.log = logger or _log
        self.verb = verb
        self.streak = 0
        self.state = LoopState(name, LoopStatus.STARTING, time.time())
        task = asyncio.current_task()
        if task is not None:
            _STATES[task] = self.state

    def healthy(self) -> None:
        raise_if_cancelling()  # a stop dropped on the way up: do not start the long wait
        if self.streak:
            self.log.info("%s: recovered after %d failure(s)", self.name, self.streak)
        self.streak = 0
        self.backoff.reset()
        if self.state.status is not LoopStatus.UP:
            self.state.status, self.state.since = LoopStatus.UP, time.time()
        self.state.failures = 0

    async def run(self, step: Callable[[], Awaitable[object]]) -> bool:
        """Run ``step``: True when it returned; False when it failed (logged, and the
        backoff waited). Our own cancellation propagates, dropped or not."""
        try:
            await step()
        except Exception as exc:
            error: BaseException = exc
        except asyncio.CancelledError as exc:
            if _cancelling():
                raise
            error = exc  # not ours (a future cancelled under us): a failure like another
        else:
            raise_if_cancelling()  # a stop dropped in a step that then returned
            return True
        raise_if_cancelling()  # a stop dropped in a step that then failed
        self.streak += 1
        self.state.status, self.state.since = LoopStatus.RETRYING, time.time()
        self.state.failures, self.state.last_error = self.streak, _describe(error)
        delay = self.backoff.next_delay()
        loud = self.streak == _TRACEBACK_AT
        self.log.warning("%s: %s; %s in %.1fs", self.name, _describe(error), self.verb, delay,
                         exc_info=error if loud else None)
        if not loud:
            self.log.debug("%s: failure %d", self.name, self.streak, exc_info=error)
        await asyncio.sleep(delay)
        return False


async def _pause(seconds: float, wake: asyncio.Event | None) -> None:
    """Wait ``seconds`` or until ``wake`` is set."""
    if wake is None:
        await asyncio.sleep(seconds)
        return
    # asyncio.timeout, not wait_for: on Python 3.11 wait_for loses a cancellation that
    # comes as the wake-up does, and the loop would never stop.
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await wake.wait()


async def session_loop(name: str, session: Callable[[Healthy], Awaitable[object]], *,
                       backoff: Backoff | None = None,
                       logger: logging.Logger | None = None) -> NoReturn:
    """Run ``session(healthy)`` again and again, forever.

    ``session`` connects and runs until its connection is lost (raising, typically
    ``aiomqtt.MqttError``); it calls ``healthy()`` once it is up, which resets the
    backoff and raises ``CancelledError`` if a stop was swallowed while it connected
    (Python 3.11 ``wait_for`` in aiomqtt), so call it before the long wait. Any
    failure is logged ("<name>: <error>; reconnecting in N s") and the next session
    starts after the backoff delay; a session that returns is started again after the
    backoff delay too (logged at INFO). Cancel the task to stop.
    """
    attempts = _Attempts(name, backoff, logger, "reconnecting")
    while True:
        if await attempts.run(lambda: session(attempts.healthy)):
            delay = attempts.backoff.next_delay()
            attempts.state.status, attempts.state.since = LoopStatus.RETRYING, time.time()
            attempts.state.last_error = "session ended"
            attempts.log.info("%s: session ended; reconnecting in %.1fs", name, delay)
            await asyncio.sleep(delay)


async def periodic_loop(name: str, round_: Callable[[], Awaitable[object]], *,
                        interval: float, wake: asyncio.Event | None = None,
                        backoff: Backoff | None = None,
                        logger: logging.Logger | None = None) -> NoReturn:
    """Run ``round_()``, wait ``interval`` seconds (or until ``wake`` is set), forever.

    A round that returns (its value is ignored) resets the backoff; one that fails is
    logged ("<name>: <error>; retrying in N s") and run again after the backoff delay
    instead of the interval. ``wake`` is cleared before each round, so a wake-up during a
    round runs another one at once. Cancel the task to stop.
    """
    attempts = _Attempts(name, backoff, logger, "retrying")
    while True:
        if wake is not None:
            wake.clear()
        if await attempts.run(round_):
            attempts.healthy()
            await _pause(interval, wake)


async def listen_loop(name: str, pool: asyncpg.Pool, channel: str,
                      round_: Callable[[], Awaitable[object]], *, poll: float,
                      wake: asyncio.Event | None = None, backoff: Backoff | None = None,
                      logger: logging.Logger | None = None) -> NoReturn:
    """Hold a connection from ``pool`` that LISTENs on ``channel``; run ``round_()`` at
    start, after each NOTIFY, when ``wake`` is set and at least every ``poll`` seconds,
    forever.

    The round runs on its own connections (the held one only listens). A failed round
    or a lost LISTEN connection is logged ("<name>: <error>; reconnecting in N s"); the
    connection goes back to the pool and, after the backoff delay, a new one LISTENs and
    a round runs at once (notifications sent meanwhile were lost, the round finds their
    work). A round that returns resets the backoff. Cancel the task to stop.
    """
    woken = wake if wake is not None else asyncio.Event()

    def notified(*_: object) -> None:
        woken.set()

    async def session(healthy: Healthy) -> NoReturn:
        lost = False

        def terminated(*_: object) -> None:
            nonlocal lost
            lost = True
            woken.set()  # do not sleep out the poll interval on a dead connection

        async with pool.acquire() as conn:
            conn.add_termination_listener(terminated)
            try:
                await conn.add_listener(channel, notified)
                while not lost:
                    woken.clear()
                    await round_()
                    healthy()  # also raises a stop swallowed in the round
                    await _pause(poll, woken)
                raise StoreError(f"the connection listening on {channel} was lost")
            finally:
                unlistened = False
                try:
                    if not lost:
                        # A connection lost under us (callback not run yet) is detached
                        # from its proxy: these fail, and it is closed below.
                        with contextlib.suppress(Exception):
                            conn.remove_termination_listener(terminated)
                            await conn.remove_listener(channel, notified)  # UNLISTEN
                            unlistened = True
                finally:
                    if not unlistened and not lost:
                        # Still LISTENing on the server, maybe: the pool does not reset
                        # on the server (store._pool), so it never serves another caller.
                        with contextlib.suppress(Exception):  # detached: lost meanwhile
                            conn.terminate()

    await session_loop(name, session, backoff=backoff, logger=logger)
