"""Fixtures of the AMQP ingest tests: RabbitMQ (``ci/services.sh`` starts it) for AMQP,
and its MQTT plugin, where devices publish. ``EDGESYNC_TEST_AMQP_URL`` and
``EDGESYNC_TEST_AMQP_MQTT_URL`` choose them; an unreachable one fails the run."""

from __future__ import annotations

import os
import socket
from urllib.parse import urlsplit

import pytest

from edgesync.protocol import parse_broker_url

AMQP_URL = os.environ.get("EDGESYNC_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
PLUGIN_MQTT_URL = os.environ.get("EDGESYNC_TEST_AMQP_MQTT_URL", "mqtt://127.0.0.1:1884")


def _reachable(host: str, port: int, what: str) -> None:
    try:
        socket.create_connection((host, port), timeout=5).close()
    except OSError as exc:
        pytest.fail(f"{what} for tests is not reachable at {host}:{port}: {exc} "
                    "(run ci/services.sh)")


@pytest.fixture(scope="session")
def amqp_url() -> str:
    parts = urlsplit(AMQP_URL)
    _reachable(parts.hostname or "127.0.0.1", parts.port or 5672, "RabbitMQ (AMQP)")
    return AMQP_URL


@pytest.fixture(scope="session")
def plugin_mqtt_url() -> str:
    """RabbitMQ's MQTT plugin (not Mosquitto): what devices publish to."""
    url = parse_broker_url(PLUGIN_MQTT_URL)
    _reachable(url.host, url.port, "RabbitMQ's MQTT plugin")
    return PLUGIN_MQTT_URL
