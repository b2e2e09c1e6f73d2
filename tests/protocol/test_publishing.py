"""PublishingClient: many QoS 1 messages handed to paho at once, PUBACKs awaited together."""

from __future__ import annotations

import asyncio
import uuid

import aiomqtt
import pytest

from edgesync.protocol import PublishingClient


async def test_publish_all_delivers_every_message_in_order() -> None:
    topic = f"edgesync-test/publishing/{uuid.uuid4().hex}"
    n = 600  # past paho's in-flight limit (64): the rest waits in paho, in order
    async with aiomqtt.Client("127.0.0.1", 1883, identifier=f"sub-{uuid.uuid4().hex}") as sub:
        await sub.subscribe(topic, qos=1)
        async with PublishingClient("127.0.0.1", 1883, identifier=f"pub-{uuid.uuid4().hex}",
                                    max_inflight_messages=64) as pub:
            await pub.publish_all([(topic, str(i).encode()) for i in range(n)])
            assert pub._acks == {}  # every PUBACK came back, none is awaited any more
            await pub.publish(topic, b"aiomqtt's own publish still works", qos=1)
        got: list[bytes] = []
        async with asyncio.timeout(30):
            async for message in sub.messages:
                assert isinstance(message.payload, bytes)
                got.append(message.payload)
                if len(got) == n + 1:
                    break
    assert got[:n] == [str(i).encode() for i in range(n)]


async def test_a_lost_connection_fails_the_awaited_publishes() -> None:
    """A broker that takes the connection, never acknowledges a publish and hangs up:
    ``publish_all`` raises instead of waiting for ever."""
    received = asyncio.Event()

    async def broker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1024)  # CONNECT
        writer.write(b"\x20\x02\x00\x00")  # CONNACK, accepted
        await writer.drain()
        await reader.read(1024)  # a PUBLISH or more, never acknowledged
        received.set()
        writer.close()

    server = await asyncio.start_server(broker, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        client = PublishingClient("127.0.0.1", port, identifier=f"pub-{uuid.uuid4().hex}")
        with pytest.raises(aiomqtt.MqttError):
            async with client:
                async with asyncio.timeout(30):
                    await client.publish_all([("t/a", b"1"), ("t/b", b"2")])
        assert received.is_set()
        assert client._acks == {}
        # aiomqtt's own record of the hang-up (read, as its message loop would).
        assert isinstance(client._disconnected.exception(), aiomqtt.MqttError)
