"""PublishingClient: the worker's publish-only QoS 1 connection, against the real
Mosquitto and against small fake brokers for what a real one will not do on cue (what it
shares with ConsumingClient is tested in test_mqtt_connection.py)."""

from __future__ import annotations

import asyncio
import uuid

import aiomqtt
import pytest
from protocol.mqtt_helpers import fake_broker

from edgesync.errors import BrokerError
from edgesync.protocol import PublishingClient


async def test_publish_all_delivers_every_message_in_order() -> None:
    topic = f"edgesync-test/publishing/{uuid.uuid4().hex}"
    n = 600  # past the window: the rest waits for room, in order
    async with aiomqtt.Client("127.0.0.1", 1883, identifier=f"sub-{uuid.uuid4().hex}") as sub:
        await sub.subscribe(topic, qos=1)
        client = PublishingClient("127.0.0.1", 1883, client_id=f"pub-{uuid.uuid4().hex}",
                                  window=64)
        async with client:
            first = asyncio.create_task(client.publish_all(
                [(topic, str(i).encode()) for i in range(n)]))
            await asyncio.sleep(0)  # the first call starts: 64 written, it waits for room
            assert not first.done() and client.waiting == 64
            # A second caller meanwhile: its message leaves after all of the first's.
            await client.publish_all([(topic, b"second")])
            await first
            assert client.waiting == 0  # every PUBACK came back
        got: list[bytes] = []
        async with asyncio.timeout(30):
            async for message in sub.messages:
                assert isinstance(message.payload, bytes)
                got.append(message.payload)
                if len(got) == n + 1:
                    break
    assert got == [str(i).encode() for i in range(n)] + [b"second"]


async def test_a_broker_that_hangs_up_fails_the_waiting_publishes() -> None:
    received = asyncio.Event()

    async def broker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1024)  # CONNECT
        writer.write(b"\x20\x02\x00\x00")  # CONNACK, accepted
        await writer.drain()
        await reader.read(1024)  # PUBLISHes, never acknowledged
        received.set()
        writer.close()

    async with fake_broker(broker) as port:
        client = PublishingClient("127.0.0.1", port, client_id="hang-up")
        async with client:
            with pytest.raises(BrokerError, match="lost"):
                async with asyncio.timeout(30):
                    await client.publish_all([("t/a", b"1"), ("t/b", b"2")])
            assert received.is_set() and client.waiting == 0
            with pytest.raises(BrokerError):
                await client.wait_closed()
            with pytest.raises(BrokerError, match="lost"):  # no writing on a lost connection
                await client.publish_all([("t/c", b"3")])
