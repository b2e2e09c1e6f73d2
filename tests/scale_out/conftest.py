"""Fixtures of the scale-out tests: a private Mosquitto (``private_mqtt``); RabbitMQ
(``ci/services.sh`` starts it) for AMQP, and its MQTT plugin, where devices publish.
``EDGESYNC_TEST_AMQP_URL`` and ``EDGESYNC_TEST_AMQP_MQTT_URL`` choose them; an
unreachable one fails the run."""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from edgesync.protocol import parse_broker_url

AMQP_URL = os.environ.get("EDGESYNC_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
PLUGIN_MQTT_URL = os.environ.get("EDGESYNC_TEST_AMQP_MQTT_URL", "mqtt://127.0.0.1:1884")
MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"


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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def private_mqtt(tmp_path: Path) -> Iterator[str]:
    """A Mosquitto of this test: unlimited queues and in-flight windows (its defaults of
    1,000 queued and 20 in flight would drop or throttle)."""
    port = _free_port()
    conf = tmp_path / "mosquitto.conf"
    conf.write_text(f"user {getpass.getuser()}\npersistence false\nlog_dest stderr\n"
                    f"allow_anonymous true\nlistener {port} 127.0.0.1\n"
                    "max_inflight_messages 0\nmax_queued_messages 0\n")
    log_path = tmp_path / "mosquitto.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen([MOSQUITTO, "-c", str(conf)], stdout=log, stderr=log)
    try:
        for _ in range(200):
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port),
                                                                        timeout=0.2):
                break
            assert proc.poll() is None, log_path.read_text()
            time.sleep(0.05)
        yield f"mqtt://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(30)
