"""The agent's MQTT link: one persistent session, reconnecting with jittered backoff.

``MqttLink.run()`` connects (client id = device id, ``clean_session`` from the config),
subscribes to ``{root}/sync/ingest/control`` at QoS 1 right after connecting, hands
every control payload to a callback in arrival order, and reconnects after any failure
(the broker's or a control handler's: ``session_loop``). ``publish()`` waits for a
connection, publishes at QoS 1 and returns once the broker's PUBACK arrived. aiomqtt
errors never leave this module: they become ``BrokerError``. Given several URLs
(``connection.server_urls``, the nodes of one broker cluster), each connection attempt
takes the next one, round robin, after the usual backoff.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import NoReturn

import aiomqtt

from edgesync.agent.config import ConnectionConfig
from edgesync.errors import BrokerError
from edgesync.protocol import (
    Backoff,
    BrokerRotation,
    Healthy,
    TopicKind,
    mqtt_client,
    raise_if_cancelling,
    session_loop,
    topic_for,
)

__all__ = ["MqttLink"]

log = logging.getLogger("edgesync.agent")

ControlHandler = Callable[[bytes], Awaitable[None]]


class MqttLink:
    def __init__(self, conn: ConnectionConfig, on_control: ControlHandler, *,
                 publish_timeout_s: float = 30.0, backoff: Backoff | None = None,
                 will: tuple[str, bytes] | None = None) -> None:
        self._conn = conn
        # (topic, payload) the broker publishes (QoS 1) when it loses this client.
        self._will = will
        self._on_control = on_control
        self._publish_timeout = publish_timeout_s
        self._backoff = backoff or Backoff()
        self._brokers = BrokerRotation(conn.brokers)
        self._client: aiomqtt.Client | None = None
        self.connected = asyncio.Event()
        # Publishes waiting for their PUBACK: aiomqtt leaves them waiting out the timeout
        # when the connection is lost, so the session's end fails them at once.
        self._awaiting: set[asyncio.Future[None]] = set()
        self.control_topic = topic_for(conn.root_topic, TopicKind.INGEST_CONTROL)

    async def run(self) -> NoReturn:
        """Stay connected forever; cancel the task to stop."""
        await session_loop(f"MQTT broker {self._brokers}", self._session,
                           backoff=self._backoff, logger=log)

    async def _session(self, healthy: Healthy) -> None:
        broker = self._brokers.take()
        client = mqtt_client(
            broker,
            identifier=self._conn.device_id,
            clean_session=self._conn.clean_session,
            keepalive=max(1, round(self._conn.keep_alive_s)),
            tls=self._conn.tls_files,
            will=None if self._will is None else aiomqtt.Will(self._will[0], self._will[1],
                                                              qos=1),
        )
        async with client:
            await client.subscribe(self.control_topic, qos=1)
            healthy()  # first: it raises a stop swallowed while connecting or subscribing
            log.info("connected to %s as %s; subscribed to %s", broker,
                     self._conn.device_id, self.control_topic)
            # Controls are handled in a task of their own, in arrival order, so the
            # connection's loss is seen while a handler waits (for a PUBACK that will
            # never come, say): the session then fails what waits on it at once.
            inbox: asyncio.Queue[bytes] = asyncio.Queue()
            reading = asyncio.ensure_future(self._read(client, inbox))
            handling = asyncio.ensure_future(self._handle(inbox))
            self._client = client
            self.connected.set()
            try:
                done, _ = await asyncio.wait({reading, handling},
                                             return_when=asyncio.FIRST_COMPLETED)
                for ended in done:
                    ended.result()  # the lost connection's error, or the handler's
            finally:
                self.connected.clear()
                self._client = None
                for sending in self._awaiting:
                    sending.cancel()
                reading.cancel()
                handling.cancel()  # the control inbox is durable: a redelivery resumes it
                await asyncio.wait({reading, handling})
                for ended in (reading, handling):
                    if not ended.cancelled():
                        ended.exception()  # retrieved: the first failure is the one raised

    @staticmethod
    async def _read(client: aiomqtt.Client, inbox: asyncio.Queue[bytes]) -> NoReturn:
        async for message in client.messages:
            if isinstance(message.payload, bytes | bytearray):
                inbox.put_nowait(bytes(message.payload))
            else:
                log.warning("ignoring a non-binary control payload on %s", message.topic)
        raise BrokerError("the broker's message stream ended")

    async def _handle(self, inbox: asyncio.Queue[bytes]) -> NoReturn:
        while True:
            payload = await inbox.get()
            await self._on_control(payload)
            raise_if_cancelling()  # a stop a handler's publish swallowed (wait_for, 3.11)

    async def publish(self, topic: str, payload: bytes) -> None:
        """Publish at QoS 1 and wait for the PUBACK; BrokerError when that fails."""
        raise_if_cancelling()  # never wait for a connection a stopping link will not make
        await self.connected.wait()
        client = self._client
        if client is None:
            raise BrokerError("not connected to the MQTT broker")
        sending = asyncio.ensure_future(
            client.publish(topic, payload, qos=1, timeout=self._publish_timeout))
        self._awaiting.add(sending)
        try:
            await sending
        except asyncio.CancelledError:
            raise_if_cancelling()  # ours; otherwise the connection ended under it
            raise BrokerError(f"publish to {topic}: the connection was lost") from None
        except aiomqtt.MqttError as exc:
            raise_if_cancelling()
            # The connection is gone (or going): what waits for a PUBACK on it never gets
            # one, even when the session is busy in a control handler and cannot end.
            for other in self._awaiting - {sending}:
                other.cancel()
            raise BrokerError(f"publish to {topic} failed: {exc}") from exc
        else:
            raise_if_cancelling()  # a stop that came with the PUBACK (3.11 wait_for)
        finally:
            self._awaiting.discard(sending)
