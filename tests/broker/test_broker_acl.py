"""A real Mosquitto running the configuration ``edgesync broker-config`` writes.

Negative checks never wait for "nothing arrived": each forbidden message is followed,
on the same connection, by a legitimate marker. Mosquitto delivers one client's
messages to a subscriber in order, so if the forbidden one had got through, it would
arrive before the marker.
"""

from __future__ import annotations

import aiomqtt
import pytest
from broker_helpers import Deployment

from edgesync import credentials
from edgesync.protocol import TopicKind

ROWS = TopicKind.ROWS_BATCH.value
CONTROL = TopicKind.INGEST_CONTROL.value
KINDS_UP = [k.value for k in TopicKind if k is not TopicKind.INGEST_CONTROL]


async def _subscribe_worker(dep: Deployment, worker: aiomqtt.Client) -> None:
    for kind in KINDS_UP:
        granted = await worker.subscribe(f"+/+/{kind}", qos=1)
        assert all(int(c.value if hasattr(c, "value") else c) < 0x80 for c in granted)


@pytest.mark.parametrize("auth", ["mtls", "password"])
async def test_device_publishes_only_under_its_own_topics(deployment: Deployment,
                                                          auth: str) -> None:
    dep = deployment
    await dep.add_device("dev-a")
    await dep.add_device("dev-b")
    await dep.start()
    device = dep.device_mtls("dev-a") if auth == "mtls" else dep.device_password("dev-a")
    async with dep.worker() as worker, device:
        await _subscribe_worker(dep, worker)
        # as device B, on every topic kind
        for kind in KINDS_UP:
            await device.publish(dep.topic("dev-b", kind), b"forged", qos=1)
        # on control topics (its own and B's), and outside the sync tree
        await device.publish(dep.topic("dev-a", CONTROL), b"forged", qos=1)
        await device.publish(dep.topic("dev-b", CONTROL), b"forged", qos=1)
        await device.publish(f"other-slug/dev-a/{ROWS}", b"forged", qos=1)
        await device.publish(f"/dev-a/{ROWS}", b"forged", qos=1)
        await device.publish("$SYS/broker/forged", b"forged", qos=1)
        # then legitimately, on each of its own topics
        for kind in KINDS_UP:
            await device.publish(dep.topic("dev-a", kind), kind.encode(), qos=1)
        got = [await dep.next_message(worker) for _ in KINDS_UP]
    assert sorted(str(m.topic) for m in got) == sorted(dep.topic("dev-a", k) for k in KINDS_UP)
    assert all(m.payload != b"forged" for m in got)


async def test_device_reads_only_its_own_control_topic(deployment: Deployment) -> None:
    dep = deployment
    await dep.add_device("dev-a")
    await dep.add_device("dev-b")
    await dep.start()
    async with dep.worker() as worker, dep.device_mtls("dev-a") as dev_a, \
            dep.device_mtls("dev-b") as dev_b:
        # Mosquitto grants these SUBACKs but checks read access on every delivery.
        for topic_filter in (dep.topic("dev-b", CONTROL), f"{dep.slug}/+/{CONTROL}", "#",
                             f"$share/g/{dep.slug}/dev-b/{CONTROL}",
                             dep.topic("dev-a", CONTROL)):
            await dev_a.subscribe(topic_filter, qos=1)
        await dev_b.subscribe(dep.topic("dev-b", CONTROL), qos=1)
        await worker.publish(dep.topic("dev-b", CONTROL), b"for-b", qos=1)
        await worker.publish(dep.topic("dev-b", ROWS), b"rows-of-b", qos=1)  # not allowed
        await worker.publish(dep.topic("dev-a", CONTROL), b"for-a", qos=1)
        first_a = await dep.next_message(dev_a)
        first_b = await dep.next_message(dev_b)
    assert (str(first_a.topic), first_a.payload) == (dep.topic("dev-a", CONTROL), b"for-a")
    assert (str(first_b.topic), first_b.payload) == (dep.topic("dev-b", CONTROL), b"for-b")


async def test_worker_cannot_publish_device_data(deployment: Deployment) -> None:
    """The worker account writes controls only: it cannot forge device batches."""
    dep = deployment
    await dep.add_device("dev-a")
    await dep.start()
    async with dep.worker("w-observer") as observer, dep.worker("w-sender") as sender:
        await _subscribe_worker(dep, observer)
        await sender.publish(dep.topic("dev-a", ROWS), b"forged", qos=1)
        async with dep.device_mtls("dev-a") as dev_a:
            await dev_a.publish(dep.topic("dev-a", ROWS), b"real", qos=1)
        msg = await dep.next_message(observer)
    assert msg.payload == b"real"


async def test_revoked_certificate_is_refused(deployment: Deployment) -> None:
    dep = deployment
    scope = await dep.add_device("dev-a", password=False)
    await dep.start()
    async with dep.device_mtls("dev-a"):
        pass  # connects while valid
    async with dep.pool.acquire() as conn:
        assert await credentials.revoke_credentials(
            conn, scope.device_id, credential_id=dep.certs["dev-a"].credential_id) == 1
        fresh = await credentials.issue_certificate(conn, scope)
    revoked = dep.certs["dev-a"]
    assert revoked.key_pem is not None
    assert await dep.mtls_accepts(revoked.cert_pem, revoked.key_pem)  # until reloaded
    await dep.apply()
    assert not await dep.mtls_accepts(revoked.cert_pem, revoked.key_pem)
    # another, unrevoked certificate of the same device still works
    dep.certs["dev-a"] = fresh
    async with dep.device_mtls("dev-a"):
        pass


async def test_revoked_and_rotated_passwords_are_refused(deployment: Deployment) -> None:
    dep = deployment
    scope = await dep.add_device("dev-a", cert=False)
    await dep.start()
    old = dep.passwords["dev-a"]
    async with dep.device_password("dev-a"):
        pass
    async with dep.pool.acquire() as conn:
        new = (await credentials.issue_password(conn, scope)).password  # rotates
    await dep.apply()
    with pytest.raises(aiomqtt.MqttError):
        async with dep.device_password("dev-a", password=old):
            pass
    async with dep.device_password("dev-a", password=new):
        pass
    async with dep.pool.acquire() as conn:
        await credentials.revoke_credentials(conn, scope.device_id)
    await dep.apply()
    with pytest.raises(aiomqtt.MqttError):
        async with dep.device_password("dev-a", password=new):
            pass


async def test_wrong_password_and_unknown_users_are_refused(deployment: Deployment) -> None:
    dep = deployment
    await dep.add_device("dev-a", cert=False)
    await dep.start()
    for user, password in (("dev-a", "wrong"), ("nobody", "x"), ("dev-b", "x")):
        with pytest.raises(aiomqtt.MqttError):
            async with dep.device_password(user, password=password):
                pass
    # the worker account is not valid on a device listener, nor a device on the worker's
    with pytest.raises(aiomqtt.MqttError):
        async with dep.device_password(dep.opts.worker_username, password=dep.worker_password):
            pass


async def test_wildcard_client_ids_and_usernames_get_nowhere(deployment: Deployment) -> None:
    """Client ids are replaced by the username; a username with + or # (which edgesync
    never issues — forced into the password file here) matches no ACL pattern."""
    dep = deployment
    await dep.add_device("dev-a")
    await dep.add_device("dev-b")
    await dep.start()
    passwd = next(dep.out.glob("projects/*/devices.passwd"))
    with passwd.open("a") as f:
        for user in ("+", "a#"):  # a line starting with '#' would be a comment
            f.write(f"{user}:{credentials.hash_password('wild')}\n")
    await dep.broker.reload()
    async with dep.worker() as worker, \
            dep.device_password("+", password="wild") as plus, \
            dep.device_password("a#", password="wild") as hash_, \
            dep.device_mtls("dev-a", client_id="#") as dev_a:
        await _subscribe_worker(dep, worker)
        for client in (plus, hash_):
            await client.subscribe(f"{dep.slug}/+/{CONTROL}", qos=1)
            await client.subscribe("#", qos=1)
        await dev_a.subscribe(dep.topic("dev-a", CONTROL), qos=1)
        await worker.publish(dep.topic("dev-b", CONTROL), b"for-b", qos=1)
        await worker.publish(dep.topic("dev-a", CONTROL), b"for-a", qos=1)
        # The client id '#' was replaced by its username: it reads dev-a's controls only.
        first = await dep.next_message(dev_a)
        assert first.payload == b"for-a"
        # Both controls have been routed now. A QoS 1 round trip on each wildcard user's
        # connection comes back after anything routed to it before: nothing was.
        for client in (plus, hash_):
            await client.publish(f"{dep.slug}/x/{ROWS}", b"forged", qos=1)
            assert len(client.messages) == 0
        await dev_a.publish(dep.topic("dev-b", ROWS), b"forged", qos=1)
        await dev_a.publish(dep.topic("dev-a", ROWS), b"marker", qos=1)
        msg = await dep.next_message(worker)
    assert (str(msg.topic), msg.payload) == (dep.topic("dev-a", ROWS), b"marker")


async def test_a_device_cannot_take_over_another_devices_session(
        deployment: Deployment) -> None:
    dep = deployment
    await dep.add_device("dev-a")
    await dep.add_device("dev-b")
    await dep.start()
    async with dep.worker() as worker, dep.device_mtls("dev-b") as dev_b:
        await _subscribe_worker(dep, worker)
        async with dep.device_mtls("dev-a", client_id="dev-b") as dev_a:
            await dev_a.publish(dep.topic("dev-a", ROWS), b"from-a", qos=1)
            # dev-b's connection survived dev-a's CONNECT with its client id
            await dev_b.publish(dep.topic("dev-b", ROWS), b"from-b", qos=1)
        got = {(await dep.next_message(worker)).payload for _ in range(2)}
    assert got == {b"from-a", b"from-b"}


async def test_worker_shared_subscriptions_receive(deployment: Deployment) -> None:
    """``edgesync serve --shared-group`` subscribes through ``$share/…``."""
    dep = deployment
    await dep.add_device("dev-a")
    await dep.start()
    async with dep.worker() as worker, dep.device_password("dev-a") as dev_a:
        await worker.subscribe(f"$share/workers/+/+/{ROWS}", qos=1)
        await dev_a.publish(dep.topic("dev-a", ROWS), b"shared", qos=1)
        msg = await dep.next_message(worker)
    assert msg.payload == b"shared"
