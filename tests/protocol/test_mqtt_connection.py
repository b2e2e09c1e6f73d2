"""What both hand-written clients get from ``MqttConnection``: refusals said with MQTT's
reason, user name and password, and the keep-alive that takes a silent broker for gone."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from kits.fault_kit import free_port
from protocol.mqtt_helpers import CONNACK, fake_broker, password_mosquitto

from edgesync.errors import BrokerError
from edgesync.protocol import ConsumingClient, PublishingClient

CLIENTS = pytest.mark.parametrize("client_type", [PublishingClient, ConsumingClient])
Client = type[PublishingClient] | type[ConsumingClient]


@CLIENTS
async def test_a_refused_connection_says_why(client_type: Client) -> None:
    async def broker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1024)
        writer.write(b"\x20\x02\x00\x04")  # CONNACK: bad user name or password
        await writer.drain()
        await reader.read(1024)  # until the client hangs up
        writer.close()

    async with fake_broker(broker) as port:
        with pytest.raises(BrokerError, match="bad user name or password"):
            async with client_type("127.0.0.1", port, client_id="refused"):
                pass
    with pytest.raises(BrokerError, match="cannot connect"):
        async with client_type("127.0.0.1", free_port(), client_id="nobody"):
            pass


@CLIENTS
async def test_user_name_and_password(client_type: Client, tmp_path: Path) -> None:
    async with password_mosquitto(tmp_path) as (port, secret):
        async with client_type("127.0.0.1", port, client_id="worker", username="worker",
                               password=secret) as client:
            assert client.is_connected
        with pytest.raises(BrokerError, match="refused the connection"):
            async with client_type("127.0.0.1", port, client_id="worker", username="worker",
                                   password="wrong"):
                pass


@CLIENTS
async def test_a_silent_broker_is_taken_for_gone(client_type: Client) -> None:
    """Keep-alive: PINGREQs go out when idle; no answer for 1.5 intervals ends it."""
    pings = 0

    async def broker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal pings
        await reader.read(1024)
        writer.write(CONNACK)
        await writer.drain()
        while data := await reader.read(1024):
            pings += data.count(b"\xc0\x00")
        writer.close()

    async with fake_broker(broker) as port, client_type(
            "127.0.0.1", port, client_id="silent", keepalive=1) as client:
        with pytest.raises(BrokerError, match="sent nothing"):
            async with asyncio.timeout(10):
                await client.wait_closed()
    assert pings >= 1
