"""ConsumingClient: the worker's consuming QoS 1 connection. Its framing is fed reads by
hand (a fake broker holds the connection and takes what the client writes); the window,
acknowledgement after ``finished``, resumed sessions and shared subscriptions are
counted on a Mosquitto of the test's own; hang-ups and refusals on fake brokers. What
it shares with PublishingClient (CONNACK refusals, password, keep-alive) is tested in
test_mqtt_connection.py."""

from __future__ import annotations

import asyncio
import contextlib
import random
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kits.e2e_kit import eventually
from kits.fault_kit import Broker
from protocol.mqtt_helpers import CONNACK, fake_broker

from edgesync.errors import BrokerError
from edgesync.protocol import ConsumingClient, MqttMessage, PublishingClient

PINGRESP = b"\xd0\x00"


def publish(topic: str, payload: bytes, *, qos: int = 1, packet_id: int = 0) -> bytes:
    """A PUBLISH as a broker sends it (QoS 2 too, which the client refuses)."""
    raw = topic.encode()
    body = len(raw).to_bytes(2, "big") + raw
    if qos:
        body += packet_id.to_bytes(2, "big")
    body += payload
    size, length = len(body), bytearray()
    while True:
        size, digit = divmod(size, 128)
        length.append(digit | (0x80 if size else 0))
        if not size:
            break
    return bytes([0x30 | qos << 1]) + bytes(length) + body


def as_tuples(messages: list[MqttMessage]) -> list[tuple[str, bytes, int, int]]:
    return [(m.topic, m.payload, m.qos, m.packet_id) for m in messages]


class Taker:
    """A fake broker's connection: CONNACK, then everything the client writes is kept."""

    def __init__(self) -> None:
        self.written = bytearray()

    async def __call__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1024)  # CONNECT
        writer.write(CONNACK)
        while data := await reader.read(65536):
            self.written += data
        writer.close()

    def pubacks(self) -> list[int]:
        """Packet ids of the PUBACKs written so far (the client writes nothing else here)."""
        raw = bytes(self.written)
        assert len(raw) % 4 == 0 and all(raw[i:i + 2] == b"\x40\x02"
                                         for i in range(0, len(raw), 4)), raw
        return [int.from_bytes(raw[i + 2:i + 4], "big") for i in range(0, len(raw), 4)]


@contextlib.asynccontextmanager
async def fed(window: int = 256) -> AsyncIterator[tuple[ConsumingClient, Taker]]:
    """A client on a fake broker that sends nothing after CONNACK: the test feeds the
    client's framing itself, through ``data_received``, as the transport would."""
    taker = Taker()
    async with fake_broker(taker) as port, ConsumingClient(
            "127.0.0.1", port, client_id="fed", window=window) as client:
        yield client, taker


def stream() -> tuple[bytes, list[tuple[str, bytes, int, int]]]:
    """Packets of every shape the client reads (lengths of 1, 2 and 3 bytes, QoS 0 and
    1, PINGRESPs between them) and the messages they hold."""
    expected, packets = [], []
    for i in range(40):
        topic = f"slug/gw-{i % 7}/sync/rows/batch"
        payload = bytes([i % 251]) * (20_000 if i == 13 else 150 if i % 5 == 0 else i)
        qos = 0 if i % 6 == 0 else 1
        packet_id = 0 if qos == 0 else 1000 + i
        packets.append(publish(topic, payload, qos=qos, packet_id=packet_id))
        if i % 9 == 0:
            packets.append(PINGRESP)
        expected.append((topic, payload, qos, packet_id))
    return b"".join(packets), expected


async def test_every_packet_of_a_read_is_handed_over_at_once() -> None:
    data, expected = stream()
    async with fed() as (client, _):
        client.data_received(data)
        got = await client.receive()
        assert as_tuples(got) == expected
        assert client.unfinished == client.most_unfinished == len(expected)


@pytest.mark.parametrize("cut", ["every byte", "random", "64 KiB"])
async def test_packets_split_across_reads(cut: str) -> None:
    data, expected = stream()
    big = publish("slug/gw-big/sync/telemetry/batch", b"t" * 300_000, packet_id=7)
    data += big
    expected.append(("slug/gw-big/sync/telemetry/batch", b"t" * 300_000, 1, 7))
    rng = random.Random(cut)
    sizes = {"every byte": lambda: 1, "random": lambda: rng.randint(1, 700),
             "64 KiB": lambda: 65536}[cut]
    async with fed() as (client, _):
        at = 0
        while at < len(data):
            # (byte by byte up to the large packet, whose 300,000 reads would take long)
            step = sizes() if cut != "every byte" or at < len(data) - len(big) else 4096
            client.data_received(data[at:at + step])
            at += step
        assert as_tuples(await client.receive()) == expected


async def test_the_window_holds_at_once_and_resumes_at_three_quarters() -> None:
    packets = [publish(f"s/gw-{i}/sync/rows/batch", b"%d" % i, packet_id=i + 1)
               for i in range(20)]
    async with fed(window=8) as (client, taker):
        client.data_received(b"".join(packets))  # one read, more than the window
        first = await client.receive()
        assert [m.packet_id for m in first] == list(range(1, 9))
        assert client.reading_paused and client.unfinished == 8
        assert client._transport is not None and not client._transport.is_reading()
        client.finished(first[0])
        assert client.reading_paused  # 7 unfinished: not a quarter free yet
        client.finished(first[1], ack=False)  # abandoned: no PUBACK
        # 6 = 3/4 of 8: reading resumes, starting with what the hold left unframed,
        # and holds again at once at 8.
        assert client.unfinished == 8 and client.reading_paused
        second = await client.receive()
        assert [m.packet_id for m in second] == [9, 10]
        for m in first[2:] + second:
            client.finished(m)
        third = await client.receive()
        assert [m.packet_id for m in third] == list(range(11, 19))
        for m in third:
            client.finished(m)
        last = await client.receive()
        assert [m.packet_id for m in last] == [19, 20] and not client.reading_paused
        assert client._transport.is_reading()
        for m in last:
            client.finished(m)
        assert client.unfinished == 0 and client.most_unfinished == 8

        async def all_acked() -> bool:
            return len(taker.written) >= 4 * 19

        await eventually(all_acked, 10, "19 PUBACKs")
        assert sorted(taker.pubacks()) == [1, *range(3, 21)]  # not 2: abandoned


async def test_qos_2_and_malformed_packets_end_the_connection() -> None:
    async with fed() as (client, _):
        client.data_received(publish("a/b", b"x", qos=1, packet_id=1)
                             + publish("a/b", b"y", qos=2, packet_id=2))
        with pytest.raises(BrokerError, match="QoS 2"):
            await client.receive()  # the message before it is dropped with the connection
    async with fed() as (client, _):
        client.data_received(b"\x32\x05\x00\x09a/b")  # a topic longer than its packet
        with pytest.raises(BrokerError, match="malformed"):
            await client.receive()
    async with fed() as (client, _):
        client.data_received(b"\x32\xff\xff\xff\xff\x01")  # a length of five bytes
        with pytest.raises(BrokerError, match="malformed"):
            await client.receive()
    async with fed() as (client, _):
        client.data_received(b"\x40\x02\x00\x01")  # a PUBACK: it never publishes
        with pytest.raises(BrokerError, match="unexpected packet"):
            await client.receive()


async def test_a_broker_that_hangs_up_ends_receive_and_subscribe() -> None:
    async def mid_stream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1024)
        writer.write(CONNACK + publish("a/b", b"1", packet_id=1)
                     + publish("a/b", b"2", packet_id=2))
        await writer.drain()
        await asyncio.sleep(0.2)
        writer.close()

    async with fake_broker(mid_stream) as port, ConsumingClient(
            "127.0.0.1", port, client_id="hang-up") as client:
        got: list[MqttMessage] = []
        with pytest.raises(BrokerError, match="lost"):
            async with asyncio.timeout(10):
                while True:
                    got += await client.receive()
        assert [m.payload for m in got] == [b"1", b"2"]
        assert not client.is_connected
        with pytest.raises(BrokerError):
            await client.wait_closed()

    async def at_subscribe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1024)
        writer.write(CONNACK)
        await reader.read(1024)  # SUBSCRIBE, never answered
        writer.close()

    async with fake_broker(at_subscribe) as port, ConsumingClient(
            "127.0.0.1", port, client_id="hang-up") as client:
        with pytest.raises(BrokerError, match="lost"):
            async with asyncio.timeout(10):
                await client.subscribe(["a/#"])


async def test_a_refused_subscription_names_its_filter() -> None:
    async def refusing(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1024)
        writer.write(CONNACK)
        subscribe = await reader.read(1024)
        assert subscribe[0] == 0x82 and b"$share/g/b/#" in subscribe
        writer.write(b"\x90\x04" + subscribe[2:4] + b"\x01\x80")  # granted 1, refused
        await reader.read(1024)
        writer.close()

    async with fake_broker(refusing) as port, ConsumingClient(
            "127.0.0.1", port, client_id="refused") as client:
        with pytest.raises(BrokerError, match=r"refused the subscription to \$share/g/b/#"):
            async with asyncio.timeout(10):
                await client.subscribe(["a/#", "$share/g/b/#"])


async def test_a_full_window_is_not_silence() -> None:
    """Held, the client reads nothing, PINGRESPs included: that is not a silent broker."""
    async def answering(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1024)
        writer.write(CONNACK + b"".join(publish("a/b", b"%d" % i, packet_id=i + 1)
                                        for i in range(6)))
        while data := await reader.read(1024):
            writer.write(PINGRESP * data.count(b"\xc0\x00"))
        writer.close()

    async with fake_broker(answering) as port, ConsumingClient(
            "127.0.0.1", port, client_id="held", keepalive=1, window=4) as client:
        async with asyncio.timeout(10):
            first = await client.receive()
            while len(first) < 4:
                first += await client.receive()
        await asyncio.sleep(3.5)  # more than 1.5 keep-alive intervals, held
        assert client.is_connected and client.reading_paused
        for m in first:
            client.finished(m)
        async with asyncio.timeout(10):
            rest = await client.receive()
        assert [m.payload for m in first + rest] == [b"%d" % i for i in range(6)]


# ------------------------------------------------------------------ on Mosquitto


@pytest.fixture
async def mosquitto(tmp_path: Path) -> AsyncIterator[Broker]:
    """A Mosquitto of the test's own, nothing queued or in flight limited."""
    broker = Broker(tmp_path)
    await broker.start()
    try:
        yield broker
    finally:
        await broker.stop()


def topics(n: int) -> tuple[str, list[tuple[str, bytes]]]:
    root = f"edgesync-test/consuming/{uuid.uuid4().hex[:8]}"
    return f"{root}/+/sync/rows/batch", [
        (f"{root}/gw-{i % 10}/sync/rows/batch", b"batch-%d" % i) for i in range(n)]


async def send(port: int, messages: list[tuple[str, bytes]]) -> None:
    async with PublishingClient("127.0.0.1", port, client_id=f"dev-{uuid.uuid4().hex}") as dev:
        await dev.publish_all(messages)


async def nothing_comes_back(port: int, client_id: str) -> None:
    async with ConsumingClient("127.0.0.1", port, client_id=client_id) as client:
        assert client.session_present
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.5):
                await client.receive()


async def test_a_backlog_drains_through_the_window(mosquitto: Broker) -> None:
    topic_filter, messages = topics(2000)
    async with ConsumingClient("127.0.0.1", mosquitto.port, client_id="drain") as client:
        assert not client.session_present
        await client.subscribe([topic_filter])
    await send(mosquitto.port, messages)  # queued for the session while it is away
    got: list[bytes] = []
    async with ConsumingClient("127.0.0.1", mosquitto.port, client_id="drain",
                               window=32) as client:
        assert client.session_present
        async with asyncio.timeout(30):
            while len(got) < len(messages):
                batch = await client.receive()
                assert client.unfinished <= 32
                await asyncio.sleep(0.001)  # the work: nothing more comes meanwhile
                assert client.unfinished <= 32
                for m in batch:
                    got.append(m.payload)
                    client.finished(m)
        assert client.most_unfinished == 32  # the broker sent all at once: only the window
    assert sorted(got) == sorted(p for _, p in messages)
    assert len(set(got)) == len(got)
    await nothing_comes_back(mosquitto.port, "drain")


async def test_acknowledged_only_when_finished(mosquitto: Broker) -> None:
    topic_filter, messages = topics(10)
    async with ConsumingClient("127.0.0.1", mosquitto.port, client_id="acks") as client:
        await client.subscribe([topic_filter])
        await send(mosquitto.port, messages)
        got: list[MqttMessage] = []
        async with asyncio.timeout(10):
            while len(got) < 10:
                got += await client.receive()
        for m in got[:5]:
            client.finished(m)
        for m in got[5:7]:
            client.finished(m, ack=False)
        # got[7:] never finished: the connection ends with them in flight
    async with ConsumingClient("127.0.0.1", mosquitto.port, client_id="acks") as client:
        assert client.session_present
        again: list[MqttMessage] = []
        async with asyncio.timeout(10):
            while len(again) < 5:
                again += await client.receive()
        assert [m.payload for m in again] == [p for _, p in messages[5:]]
        for m in again:
            client.finished(m)
    await nothing_comes_back(mosquitto.port, "acks")


async def test_a_shared_subscription_splits_the_messages(mosquitto: Broker) -> None:
    topic_filter, messages = topics(200)
    shared = f"$share/workers/{topic_filter}"
    got: dict[str, list[bytes]] = {"w1": [], "w2": []}
    async with ConsumingClient("127.0.0.1", mosquitto.port, client_id="w1") as w1, \
            ConsumingClient("127.0.0.1", mosquitto.port, client_id="w2") as w2:
        await w1.subscribe([shared])
        await w2.subscribe([shared])
        await send(mosquitto.port, messages)

        async def take(name: str, client: ConsumingClient) -> None:
            while sum(map(len, got.values())) < len(messages):
                for m in await client.receive():
                    got[name].append(m.payload)
                    client.finished(m)

        async with asyncio.timeout(30):
            done, pending = await asyncio.wait(
                [asyncio.create_task(take("w1", w1)), asyncio.create_task(take("w2", w2))],
                return_when=asyncio.FIRST_COMPLETED)
            for task in pending:
                task.cancel()
            await asyncio.gather(*done)
    assert got["w1"] and got["w2"]
    assert sorted(got["w1"] + got["w2"]) == sorted(p for _, p in messages)


async def test_a_broker_restart_ends_receive(mosquitto: Broker) -> None:
    async with ConsumingClient("127.0.0.1", mosquitto.port, client_id="restart") as client:
        await client.subscribe(["edgesync-test/restart/#"])
        receiving = asyncio.create_task(client.receive())
        await mosquitto.restart()
        with pytest.raises(BrokerError, match="lost"):
            async with asyncio.timeout(10):
                await receiving
