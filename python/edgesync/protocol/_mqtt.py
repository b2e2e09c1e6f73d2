"""One way to open an MQTT client, for the agent and the worker alike."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import aiomqtt

from edgesync.protocol._broker_url import BrokerUrl

__all__ = ["TlsFiles", "mqtt_client"]


class TlsFiles:
    """PEM paths for (m)TLS; all optional (system trust store when no CA is given)."""

    __slots__ = ("ca", "cert", "key")

    def __init__(self, ca: Path | None = None, cert: Path | None = None,
                 key: Path | None = None) -> None:
        self.ca, self.cert, self.key = ca, cert, key

    def context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.ca) if self.ca else None)
        if self.cert:
            ctx.load_cert_chain(str(self.cert), str(self.key) if self.key else None)
        return ctx


def mqtt_client(
    url: BrokerUrl,
    *,
    identifier: str,
    clean_session: bool,
    keepalive: int = 30,
    tls: TlsFiles | None = None,
    username: str | None = None,
    password: str | None = None,
    client_type: type[aiomqtt.Client] = aiomqtt.Client,
    **extra: Any,
) -> aiomqtt.Client:
    """``client_type`` and ``extra`` (its own keyword arguments): another client class,
    e.g. ``AckingClient`` with its ``window``."""
    tls_context = None
    if url.tls:
        tls_context = (tls or TlsFiles()).context()
    return client_type(
        url.host,
        url.port,
        identifier=identifier,
        clean_session=clean_session,
        keepalive=keepalive,
        username=username if username is not None else url.username,
        password=password if password is not None else url.password,
        tls_context=tls_context,
        # QoS 1 redeliveries of a persistent session must not be refused for lack of room.
        max_inflight_messages=64,
        max_queued_outgoing_messages=10_000,
        **extra,
    )
