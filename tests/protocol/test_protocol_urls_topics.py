"""Broker URLs and topics: the forms the agent and the server accept, and clear errors."""

from __future__ import annotations

import pytest

from edgesync.errors import ConfigError
from edgesync.protocol import TopicKind, parse_broker_url, parse_topic, topic_for


@pytest.mark.parametrize(("url", "host", "port", "tls"), [
    ("tcp://broker:1883", "broker", 1883, False),
    ("mqtt://broker", "broker", 1883, False),
    ("ssl://broker", "broker", 8883, True),
    ("mqtts://broker:9883", "broker", 9883, True),
])
def test_broker_url_forms(url: str, host: str, port: int, tls: bool) -> None:
    parsed = parse_broker_url(url)
    assert (parsed.host, parsed.port, parsed.tls) == (host, port, tls)


def test_broker_url_credentials_and_errors() -> None:
    parsed = parse_broker_url("mqtt://worker:p%40ss@127.0.0.1:1883")
    assert (parsed.username, parsed.password) == ("worker", "p@ss")
    for bad, words in [("http://x", "not supported"), ("quic://x", "quic"),
                       ("mqtt://", "no host"), ("mqtt://x:notaport", "not a broker URL")]:
        with pytest.raises(ConfigError) as exc:
            parse_broker_url(bad, "connection.server_url")
        assert exc.value.field == "connection.server_url" and words in str(exc.value)


def test_topics_round_trip_and_refuse_non_sync_topics() -> None:
    assert topic_for("acme/gw-7", TopicKind.ROWS_BATCH) == "acme/gw-7/sync/rows/batch"
    ref = parse_topic("/gw-7/sync/ingest/ack")
    assert ref is not None and (ref.slug, ref.device_name) == ("", "gw-7")
    for bad in ["acme/gw/sync/unknown", "acme//sync/rows/batch", "acme/+/sync/rows/batch",
                "acme/gw/sync/rows/batch/extra", "short/topic"]:
        assert parse_topic(bad) is None
