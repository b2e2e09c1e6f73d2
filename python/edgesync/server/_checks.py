"""What ``edgesync serve`` checks before it starts anything.

Each mistake an operator can make on the command line (a URL that is not PostgreSQL's, a
TLS file that is missing or not PEM, a port another process holds) becomes one
``ConfigError`` naming the option and the fix, raised before the embedded PostgreSQL
(seconds of initdb on a first run) or the broker starts.
"""

from __future__ import annotations

import errno
import socket
from typing import TYPE_CHECKING

from edgesync.errors import ConfigError
from edgesync.ingest import check_amqp_urls
from edgesync.protocol import BrokerUrl, parse_broker_urls
from edgesync.store import check_database_url

if TYPE_CHECKING:
    from edgesync.server._server import ServerSettings

__all__ = ["bind_api_socket", "check_settings"]

_TLS_OPTIONS = {"ca": "--mqtt-ca", "cert": "--mqtt-cert", "key": "--mqtt-key"}
# Seconds between rounds of progress confirmations that --progress-interval accepts.
_PROGRESS_INTERVAL = (0.1, 30.0)


def check_settings(s: ServerSettings) -> BrokerUrl | None:
    """Every check that needs no server; returns the parsed ``--mqtt-url`` (its first URL
    when it names several, the nodes of one broker cluster; None: embedded)."""
    if s.database_url:
        check_database_url(s.database_url, "--database-url")
    if s.amqp_url:
        check_amqp_urls(s.amqp_url, "--amqp-url")
        if not s.mqtt_url:
            raise ConfigError("--amqp-url", "needs --mqtt-url, the broker devices get "
                              "their controls from (e.g. RabbitMQ's MQTT plugin)")
    for option, port in (("--api-port", s.api_port), ("--embedded-mqtt-port",
                                                      s.embedded_mqtt_port)):
        if port is not None and not 0 <= port <= 65535:
            raise ConfigError(option, f"{port} is not a TCP port; give 1 to 65535 (0 picks a "
                                      "free one)")
    for option, value in (("--amqp-prefetch", s.amqp_prefetch),
                          ("--ingest-lanes", s.ingest_lanes),
                          ("--ingest-group-max", s.ingest_group_max)):
        if value < 1:
            raise ConfigError(option, f"must be at least 1, not {value}")
    if not _PROGRESS_INTERVAL[0] <= s.progress_interval <= _PROGRESS_INTERVAL[1]:
        # Agents send again what stays unconfirmed for their confirm_timeout (60 s by
        # default): rounds further apart than half of it would make them resend.
        raise ConfigError("--progress-interval",
                          f"must be {_PROGRESS_INTERVAL[0]:g} to {_PROGRESS_INTERVAL[1]:g} "
                          f"seconds, not {s.progress_interval:g} (agents send again what is "
                          "not confirmed within their confirm_timeout, 60 s by default)")
    if s.tls is not None:
        s.tls.check(_TLS_OPTIONS)
    if s.mqtt_url:
        return parse_broker_urls(s.mqtt_url, "--mqtt-url")[0]
    if s.embedded_mqtt_port:
        # Free now, so the broker's own bind (after PostgreSQL started) is expected to work.
        _probe("127.0.0.1", s.embedded_mqtt_port, "--embedded-mqtt-port",
               "give another port (0 picks a free one), or --mqtt-url for the broker "
               "already listening there")
    return None


def bind_api_socket(host: str, port: int) -> socket.socket:
    """The API's listening socket, or a one-line ConfigError naming --api-port/--api-host."""
    from edgesync.api import bind_socket

    try:
        return bind_socket(host, port)
    except OSError as exc:
        raise _bind_error(exc, host, port, "--api-port",
                          "stop the other process (another edgesync serve?) or choose "
                          "another port with --api-port (0 picks a free one)") from exc


def _probe(host: str, port: int, option: str, fix: str) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise _bind_error(exc, host, port, option, fix) from exc


def _bind_error(exc: OSError, host: str, port: int, option: str, fix: str) -> ConfigError:
    where = f"{host}:{port}"
    if exc.errno == errno.EADDRINUSE:
        return ConfigError(option, f"{where} is already in use; {fix}")
    if exc.errno == errno.EACCES:
        return ConfigError(option, f"no permission to listen on {where} (ports below 1024 "
                                   "need privileges); choose a port of 1024 or more")
    if exc.errno in (errno.EADDRNOTAVAIL, socket.EAI_NONAME) or isinstance(exc, socket.gaierror):
        return ConfigError("--api-host" if option == "--api-port" else option,
                           f"cannot listen on {where}: {exc.strerror or exc}; give an address "
                           "of this machine (e.g. 127.0.0.1 or 0.0.0.0)")
    return ConfigError(option, f"cannot listen on {where}: {exc.strerror or exc}")
