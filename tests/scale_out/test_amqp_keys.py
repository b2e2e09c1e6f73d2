"""Routing key ↔ MQTT topic through RabbitMQ's MQTT plugin, names with dots included:
the plugin turns every ``/`` into ``.`` (and leaves a ``.`` as it is), so a routing key
can stand for several topics and the registry decides which device sent it."""

from __future__ import annotations

from pathlib import Path

import asyncpg
import pytest

from edgesync import fleet
from edgesync.errors import ConfigError
from edgesync.fleet import DeviceResolver
from edgesync.ingest import amqp_binding_keys, routing_key_of, topic_candidates
from edgesync.ingest._amqp_keys import TopicResolver
from edgesync.protocol import DEVICE_TO_CLOUD, TopicKind, parse_topic, topic_for
from edgesync.server import Server, ServerSettings


@pytest.mark.parametrize("root", ["plant/gw-1", "/gw-1", "plant.a/gw.1", "/gw.1.2",
                                  "a.b.c/d", "p_1/Dev_X-9"])
@pytest.mark.parametrize("kind", sorted(DEVICE_TO_CLOUD))
def test_every_device_topic_is_a_candidate_of_its_routing_key(root: str, kind: TopicKind
                                                              ) -> None:
    topic = topic_for(root, kind)
    key = routing_key_of(topic)
    assert "/" not in key
    candidates = topic_candidates(key)
    assert topic in candidates
    # the same number of dots, the same kind, a different split between slug and device
    assert {parse_topic(t).kind for t in candidates} == {kind}  # type: ignore[union-attr]
    assert all(routing_key_of(t) == key for t in candidates)
    assert len(candidates) == root.count(".") + 1


def test_candidates_of_a_dotted_key_in_split_order() -> None:
    assert topic_candidates("plant.a.gw.1.sync.rows.batch") == [
        "plant/a.gw.1/sync/rows/batch", "plant.a/gw.1/sync/rows/batch",
        "plant.a.gw/1/sync/rows/batch"]
    assert topic_candidates(".gw.sync.telemetry.batch") == ["/gw/sync/telemetry/batch"]


@pytest.mark.parametrize("key", [
    "sync.rows.batch",                    # no device
    "plant.sync.rows.batch",              # no slug/device split
    "plant.gw.sync.ingest.control",       # cloud-to-device kind
    "plant.gw.sync.rows",                 # no kind
    "plant.gw.sync.rows.batch.extra",
    "plant..sync.rows.batch",             # empty device
    "plant.#.sync.rows.batch",            # a wildcard is no topic
])
def test_keys_of_no_device_topic_have_no_candidate(key: str) -> None:
    assert topic_candidates(key) == []


def test_bindings_catch_dotted_names_and_only_device_to_cloud_kinds() -> None:
    keys = amqp_binding_keys()
    assert len(keys) == len(DEVICE_TO_CLOUD)
    assert "#.sync.rows.batch" in keys and "#.sync.telemetry.batch" in keys
    assert not any("control" in k for k in keys)


async def test_the_registry_picks_the_device_that_exists(pool: asyncpg.Pool,
                                                         unique: str) -> None:
    async with pool.acquire() as conn:
        dotted = await fleet.add_device(conn, project=f"k1-{unique}", name="gw.1",
                                        topic_slug=f"plant.{unique}")
        # two devices whose topics the plugin makes the same routing key
        await fleet.add_device(conn, project=f"k2-{unique}", name=f"x.{unique}",
                               topic_slug=f"q-{unique}")
        await fleet.add_device(conn, project=f"k3-{unique}", name=unique,
                               topic_slug=f"q-{unique}.x")
    topics = TopicResolver(DeviceResolver(pool))
    topic = topic_for(dotted.root_topic, TopicKind.ROWS_BATCH)
    assert topic == f"plant.{unique}/gw.1/sync/rows/batch"
    assert await topics.topic(routing_key_of(topic)) == topic
    # ambiguous: dropped (logged) rather than given to either tenant
    assert await topics.topic(f"q-{unique}.x.{unique}.sync.rows.batch") is None
    # nobody registered: the first split, which the pipeline rejects as unknown_device
    assert await topics.topic(f"nobody.{unique}.z.sync.rows.batch") == \
        f"nobody/{unique}.z/sync/rows/batch"
    assert await topics.topic("sync.rows.batch") is None


@pytest.mark.parametrize(("amqp_url", "mqtt_url", "message"), [
    ("http://rabbit:5672/", "mqtt://rabbit:1883", "--amqp-url: scheme 'http' not supported"),
    ("amqp:///vhost", "mqtt://rabbit:1883", "--amqp-url: no host"),
    ("amqp://rabbit:5672/", None, "--amqp-url: needs --mqtt-url"),
])
async def test_serve_refuses_a_bad_amqp_setup_before_starting_anything(
        tmp_path: Path, amqp_url: str, mqtt_url: str | None, message: str) -> None:
    settings = ServerSettings(amqp_url=amqp_url, mqtt_url=mqtt_url, data_dir=tmp_path)
    with pytest.raises(ConfigError) as caught:
        async with Server(settings):
            pass
    assert str(caught.value).startswith(message)
