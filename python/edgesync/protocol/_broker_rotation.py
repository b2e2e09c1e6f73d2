"""The nodes of one broker cluster, tried in turn.

A client given several URLs (the agent's ``connection.server_urls``, the worker's
``--mqtt-url a,b,c``) connects to one at a time; every new connection attempt takes the
next URL, round robin. A client whose node is lost thus reaches another node on its next
attempt, paced by its session loop's backoff (docs/production.md, "A broker cluster"):
nothing here waits or retries by itself.
"""

from __future__ import annotations

from collections.abc import Sequence

from edgesync.errors import ConfigError
from edgesync.protocol._broker_url import BrokerUrl, parse_broker_url

__all__ = ["BrokerRotation", "parse_broker_urls", "rotation_of", "split_urls"]


def split_urls(text: str) -> list[str]:
    """``"a, b,c"`` → ``["a", "b", "c"]`` (empty items dropped)."""
    return [part.strip() for part in text.split(",") if part.strip()]


def parse_broker_urls(urls: str | Sequence[str], field: str = "mqtt_url"
                      ) -> tuple[BrokerUrl, ...]:
    """Several broker URLs: a comma-separated string or a sequence; ConfigError naming
    ``field`` when one is not a broker URL or none is given."""
    items = split_urls(urls) if isinstance(urls, str) else [u.strip() for u in urls]
    if not items:
        raise ConfigError(field, "names no broker URL")
    return tuple(parse_broker_url(url, field) for url in items)


class BrokerRotation:
    """Round robin over the URLs of one broker: ``take()`` gives the URL of the next
    connection attempt."""

    def __init__(self, urls: Sequence[BrokerUrl]) -> None:
        if not urls:
            raise ValueError("a broker rotation needs at least one URL")
        self.urls = tuple(urls)
        self._turn = 0

    def take(self) -> BrokerUrl:
        url = self.urls[self._turn % len(self.urls)]
        self._turn += 1
        return url

    def __str__(self) -> str:
        # One URL reads as that URL (the log lines of a single broker stay as they were).
        return ", ".join(str(url) for url in self.urls)


def rotation_of(url: BrokerUrl | BrokerRotation) -> BrokerRotation:
    """A client's constructor accepts either: one URL is a rotation of one."""
    return url if isinstance(url, BrokerRotation) else BrokerRotation([url])
