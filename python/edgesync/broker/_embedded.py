"""An in-process MQTT broker (``amqtt``) for the zero-setup default.

It accepts anonymous clients on 127.0.0.1 only; production deployments use a
real broker (Mosquitto, EMQX) with TLS and ACLs.
"""

from __future__ import annotations

import contextlib
import logging
import socket
from collections.abc import AsyncIterator

from edgesync.errors import BrokerError, ConfigError
from edgesync.protocol import BrokerUrl

__all__ = ["embedded_broker", "free_port"]

_log = logging.getLogger(__name__)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@contextlib.asynccontextmanager
async def embedded_broker(host: str = "127.0.0.1", port: int | None = None
                          ) -> AsyncIterator[BrokerUrl]:
    try:
        from amqtt.broker import Broker
    except ModuleNotFoundError as exc:
        raise ConfigError("--mqtt-url", "this install has no embedded MQTT broker: give a "
                          "broker URL, or pip install 'edgesync[embedded]'") from exc

    port = port or free_port(host)
    config = {
        "listeners": {"default": {"type": "tcp", "bind": f"{host}:{port}"}},
        "plugins": {
            "amqtt.plugins.authentication.AnonymousAuthPlugin": {"allow_anonymous": True},
        },
    }
    broker = Broker(config)
    try:
        await broker.start()
    except Exception as exc:  # amqtt raises its own BrokerError or bare OSError
        raise BrokerError(f"embedded MQTT broker could not listen on {host}:{port}: {exc}") from exc
    _log.info("embedded MQTT broker on mqtt://%s:%d", host, port)
    try:
        yield BrokerUrl(host=host, port=port, tls=False)
    finally:
        await broker.shutdown()
