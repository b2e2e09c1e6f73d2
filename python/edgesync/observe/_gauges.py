"""A collector whose families a function computes at each scrape (a process's own
figures: its loops, its in-flight peak, its build)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

__all__ = ["ScrapeCollector"]


class ScrapeCollector(Collector):
    def __init__(self, read: Callable[[], Iterable[Metric]]) -> None:
        self._read = read

    def collect(self) -> Iterator[Metric]:
        yield from self._read()
