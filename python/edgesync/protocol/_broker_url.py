"""Broker URLs as the agent and the server accept them.

``tcp://`` and ``mqtt://`` are plain MQTT (default port 1883); ``ssl://`` and
``mqtts://`` are MQTT over TLS (default port 8883). Credentials may be given as
``user:password@`` in the URL.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from edgesync.errors import ConfigError

__all__ = ["BrokerUrl", "parse_broker_url"]

_PLAIN = {"tcp", "mqtt"}
_TLS = {"ssl", "mqtts", "tls"}


@dataclass(frozen=True, slots=True)
class BrokerUrl:
    host: str
    port: int
    tls: bool
    username: str | None = None
    password: str | None = None

    def __str__(self) -> str:
        scheme = "mqtts" if self.tls else "mqtt"
        return f"{scheme}://{self.host}:{self.port}"


def parse_broker_url(url: str, field: str = "mqtt_url") -> BrokerUrl:
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise ConfigError(field, f"not a broker URL: {url!r} ({exc})") from exc
    scheme = parts.scheme.lower()
    if scheme == "quic":
        raise ConfigError(field, "quic:// is not supported; use ssl:// (MQTT over TLS)")
    if scheme not in _PLAIN | _TLS:
        raise ConfigError(
            field, f"scheme {scheme or '(none)'!r} not supported; use tcp://, mqtt://, ssl:// or mqtts://"
        )
    if not parts.hostname:
        raise ConfigError(field, f"no host in {url!r}")
    tls = scheme in _TLS
    return BrokerUrl(
        host=parts.hostname,
        port=port or (8883 if tls else 1883),
        tls=tls,
        username=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password else None,
    )
