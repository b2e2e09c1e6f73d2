"""An MQTT client that publishes many QoS 1 messages at once, cheaply.

aiomqtt's ``publish`` costs a pending-call future, a PUBACK event and a scan of every
pending call per message (and warns past 10 at once), and a caller that awaits each
one in turn pays a broker round trip per message. The worker's downlink is a fleet's
progress confirmations, about one message per device per second: measured on this
machine, ~145 µs of CPU a message through ``aiomqtt.Client.publish``, ~70 µs handed to
paho directly (``benches/bench_downlink.py``). So this one class reaches
into aiomqtt (2.x, paho 2.x) as ``AckingClient`` does for the uplink:

* ``publish_all`` hands every message to paho in order (paho keeps the order on the
  wire, and queues what exceeds its in-flight limit), then waits for all their PUBACKs
  at once: one future per message, resolved from paho's ``on_publish``;
* a lost connection fails every PUBACK still awaited (aiomqtt does not reconnect: the
  caller's session loop makes a new client, and a message without PUBACK may or may not
  have arrived — the callers' messages are idempotent or sequence-checked).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import aiomqtt
import paho.mqtt.client as paho

__all__ = ["PublishingClient"]


class PublishingClient(aiomqtt.Client):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._acks: dict[int, asyncio.Future[None]] = {}

    async def publish_all(self, messages: Sequence[tuple[str, bytes]]) -> None:
        """Publish each ``(topic, payload)`` at QoS 1, in order; returns once the broker
        acknowledged every one. Raises ``aiomqtt.MqttError`` when one cannot be handed
        to paho or the connection is lost first."""
        loop = asyncio.get_running_loop()
        waits: list[asyncio.Future[None]] = []
        try:
            for topic, payload in messages:
                info = self._client.publish(topic, payload, qos=1)
                if info.rc != paho.MQTT_ERR_SUCCESS:
                    raise aiomqtt.MqttCodeError(info.rc, f"could not publish on {topic}")
                if info.is_published():  # acknowledged already (paho may say so at once)
                    continue
                fut: asyncio.Future[None] = loop.create_future()
                self._acks[info.mid] = fut
                waits.append(fut)
            if waits:
                await asyncio.gather(*waits)
        except BaseException:
            for fut in waits:  # nobody waits for these any more
                if fut.done() and not fut.cancelled():
                    fut.exception()  # retrieved: the first failure is the one raised
                fut.cancel()
            raise

    def _on_publish(self, client: paho.Client, userdata: Any, mid: int,
                    reason_code: Any, properties: Any) -> None:
        fut = self._acks.pop(mid, None)
        if fut is None:  # one of aiomqtt's own publishes
            super()._on_publish(client, userdata, mid, reason_code, properties)
            return
        if fut.done():
            return
        if getattr(reason_code, "is_failure", False):  # MQTT 5: the broker refused it
            fut.set_exception(aiomqtt.MqttCodeError(reason_code, "publish refused"))
        else:
            fut.set_result(None)

    def _on_disconnect(self, client: paho.Client, userdata: Any, flags: Any,
                       reason_code: Any, properties: Any = None) -> None:
        acks, self._acks = self._acks, {}
        for fut in acks.values():
            if not fut.done():
                fut.set_exception(aiomqtt.MqttError(
                    "the connection was lost before the broker acknowledged"))
        super()._on_disconnect(client, userdata, flags, reason_code, properties)
