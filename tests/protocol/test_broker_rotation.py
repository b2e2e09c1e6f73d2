"""Several URLs of one broker cluster: parsed (comma-separated or a list) and taken in
turn, one per connection attempt; the AMQP ingest's URLs likewise."""

from __future__ import annotations

import pytest

from edgesync.errors import ConfigError
from edgesync.ingest import check_amqp_urls
from edgesync.protocol import BrokerRotation, parse_broker_url, parse_broker_urls, rotation_of


def test_comma_separated_or_a_list() -> None:
    want = ["mqtt://a:1883", "mqtts://b:8883", "mqtt://c:1"]
    assert [str(u) for u in parse_broker_urls("mqtt://a, mqtts://b ,tcp://c:1")] == want
    assert [str(u) for u in parse_broker_urls(["mqtt://a", "mqtts://b", "tcp://c:1"])] == want
    assert parse_broker_urls("mqtt://a") == (parse_broker_url("mqtt://a"),)


@pytest.mark.parametrize(("urls", "reason"), [
    ("mqtt://a,http://b", "scheme 'http' not supported"),
    (" , ", "names no broker URL"),
])
def test_a_bad_url_names_the_field(urls: str, reason: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_broker_urls(urls, "--mqtt-url")
    assert info.value.field == "--mqtt-url" and reason in info.value.reason


def test_each_attempt_takes_the_next_url_round_robin() -> None:
    a, b, c = parse_broker_urls("mqtt://a,mqtt://b,mqtt://c")
    rotation = BrokerRotation([a, b, c])
    assert [rotation.take() for _ in range(7)] == [a, b, c, a, b, c, a]
    assert str(rotation) == "mqtt://a:1883, mqtt://b:1883, mqtt://c:1883"


def test_one_url_reads_as_itself() -> None:
    url = parse_broker_url("mqtt://a")
    one = rotation_of(url)
    assert str(one) == str(url) and one.take() == url and one.take() == url
    assert rotation_of(one) is one
    with pytest.raises(ValueError, match="at least one URL"):
        BrokerRotation([])


def test_amqp_urls() -> None:
    assert check_amqp_urls("amqp://u:p@a:5672/, amqps://b/") == ("amqp://u:p@a:5672/",
                                                                 "amqps://b/")
    assert check_amqp_urls(["amqp://a"]) == ("amqp://a",)
    with pytest.raises(ConfigError, match="scheme 'mqtt' not supported"):
        check_amqp_urls("amqp://a,mqtt://b", "--amqp-url")
    with pytest.raises(ConfigError, match="names no AMQP URL"):
        check_amqp_urls("", "--amqp-url")
