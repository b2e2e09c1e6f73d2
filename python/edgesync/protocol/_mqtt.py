"""TLS for every MQTT client (its files, checked before connecting, and its context), and
the agent's aiomqtt client."""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aiomqtt

from edgesync.errors import ConfigError
from edgesync.protocol._broker_url import BrokerUrl

__all__ = ["TlsFiles", "mqtt_client", "tls_context"]


class TlsFiles:
    """PEM paths for (m)TLS; all optional (system trust store when no CA is given)."""

    __slots__ = ("ca", "cert", "key")

    def __init__(self, ca: Path | None = None, cert: Path | None = None,
                 key: Path | None = None) -> None:
        self.ca, self.cert, self.key = ca, cert, key

    def check(self, fields: Mapping[str, str]) -> None:
        """Raise a ConfigError naming the option or key (``fields``: ``ca``, ``cert`` and
        ``key`` to their names) of a file that is missing, unreadable or not PEM, before
        any connection is tried (a bad file would otherwise fail every reconnect)."""
        for part in ("ca", "cert", "key"):
            path: Path | None = getattr(self, part)
            if path is None:
                continue
            if not path.is_file():
                raise ConfigError(fields[part], f"file {str(path)!r} does not exist; give the "
                                                "path of a PEM file")
            try:
                path.read_bytes()
            except OSError as exc:
                raise ConfigError(fields[part], f"cannot read {str(path)!r}: "
                                                f"{exc.strerror or exc}") from exc
        if self.key and not self.cert:
            raise ConfigError(fields["cert"], f"required with {fields['key']} (mTLS needs the "
                                              "client certificate and its key)")
        if self.ca:
            try:
                ssl.create_default_context(cafile=str(self.ca))
            except ssl.SSLError as exc:
                raise ConfigError(fields["ca"], f"{str(self.ca)!r} holds no PEM CA "
                                                f"certificate ({exc.reason or exc})") from exc
        if self.cert:
            try:
                ssl.create_default_context().load_cert_chain(
                    str(self.cert), str(self.key) if self.key else None)
            except ssl.SSLError as exc:
                raise _chain_error(fields, self.cert, self.key, exc) from exc

    def context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.ca) if self.ca else None)
        if self.cert:
            ctx.load_cert_chain(str(self.cert), str(self.key) if self.key else None)
        return ctx


def _chain_error(fields: Mapping[str, str], cert: Path, key: Path | None,
                 exc: ssl.SSLError) -> ConfigError:
    if key is None:
        return ConfigError(fields["cert"], f"{str(cert)!r} is not a PEM certificate followed by "
                           f"its private key ({exc.reason or exc}); give the key with "
                           f"{fields['key']}")
    if exc.reason == "KEY_VALUES_MISMATCH":
        return ConfigError(fields["key"], f"{str(key)!r} is not the private key of the "
                                          f"certificate {str(cert)!r}")
    return ConfigError(f"{fields['cert']}/{fields['key']}",
                       f"{str(cert)!r} and {str(key)!r} are not a PEM certificate and its "
                       f"private key ({exc.reason or exc})")


def tls_context(url: BrokerUrl, tls: TlsFiles | None) -> ssl.SSLContext | None:
    """The context a client of ``url`` connects with: none for plain MQTT; over TLS, that
    of ``tls``'s files (the system's trust store when they give no CA)."""
    return (tls or TlsFiles()).context() if url.tls else None


def mqtt_client(
    url: BrokerUrl,
    *,
    identifier: str,
    clean_session: bool,
    keepalive: int = 30,
    tls: TlsFiles | None = None,
    username: str | None = None,
    password: str | None = None,
    **extra: Any,
) -> aiomqtt.Client:
    """An aiomqtt client of ``url``, ``extra`` its own keyword arguments (``will``). The
    agent's; the worker's clients are written by hand (``PublishingClient``,
    ``ConsumingClient``)."""
    return aiomqtt.Client(
        url.host,
        url.port,
        identifier=identifier,
        clean_session=clean_session,
        keepalive=keepalive,
        username=username if username is not None else url.username,
        password=password if password is not None else url.password,
        tls_context=tls_context(url, tls),
        # QoS 1 redeliveries of a persistent session must not be refused for lack of room.
        max_inflight_messages=64,
        max_queued_outgoing_messages=10_000,
        **extra,
    )
