"""Reading a metrics registry or a ``/metrics`` text in the observe tests, and the
conservation rule of docs/operations.md."""

from __future__ import annotations

from collections import defaultdict

from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def samples_of(source: CollectorRegistry | str) -> Samples:
    """Every sample by (name, labels)."""
    families = (source.collect() if isinstance(source, CollectorRegistry)
                else text_string_to_metric_families(source))
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in families for s in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sample ``name`` with exactly these labels (0 when absent)."""
    return samples.get((name, frozenset(labels.items())), 0.0)


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of the samples ``name`` whose labels include these."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= ls)


def conservation(samples: Samples) -> dict[str, tuple[float, float, float]]:
    """Per topic kind: (received, ended, in flight); the rule is received = ended +
    in flight, where ended sums every outcome (failed and abandoned included)."""
    out: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for (name, labels), v in samples.items():
        kind = dict(labels).get("kind")
        if kind is None:
            continue
        if name == "edgesync_ingest_messages_received_total":
            out[kind][0] += v
        elif name == "edgesync_ingest_messages_total":
            out[kind][1] += v
        elif name == "edgesync_ingest_messages_in_flight":
            out[kind][2] += v
    return {k: (r, e, f) for k, (r, e, f) in out.items()}


def assert_conserved(samples: Samples) -> None:
    for kind, (received, ended, in_flight) in conservation(samples).items():
        assert received == ended + in_flight, (kind, received, ended, in_flight)
