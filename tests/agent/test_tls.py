"""The agent connects over TLS with client certificates (mTLS) from its config.

Starts its own Mosquitto with a TLS listener that requires a client certificate; the
CA, server and client certificates are made here with ``cryptography``.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import getpass
import ipaddress
import shutil
import socket
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import aiomqtt
import pytest
from agent_helpers import next_message
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from edgesync.agent import Agent, AgentConfig
from edgesync.agent.config import ConnectionConfig, ReplicationConfig
from edgesync.errors import BrokerError
from edgesync.protocol import (
    ConsumingClient,
    PublishingClient,
    TlsFiles,
    mqtt_client,
    parse_broker_url,
)

MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _cert(subject: str, key: ec.EllipticCurvePrivateKey, issuer: x509.Name | None,
          issuer_key: ec.EllipticCurvePrivateKey, *, ca: bool = False,
          server: bool = False) -> x509.Certificate:
    now = dt.datetime.now(dt.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    b = (x509.CertificateBuilder().subject_name(name).issuer_name(issuer or name)
         .public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(now - dt.timedelta(minutes=5))
         .not_valid_after(now + dt.timedelta(days=1))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        b = b.add_extension(x509.KeyUsage(
            digital_signature=True, key_cert_sign=True, crl_sign=True,
            content_commitment=False, key_encipherment=False, data_encipherment=False,
            key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
        b = b.add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                            critical=False)
    else:
        b = b.add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
            issuer_key.public_key()), critical=False)
    if server:
        b = b.add_extension(x509.SubjectAlternativeName([
            x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False)
    return b.sign(issuer_key, hashes.SHA256())


def _write(path: Path, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> None:
    path.with_suffix(".pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    path.with_suffix(".key").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def tls_broker(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """A Mosquitto with one mTLS listener; yields (port, directory of the PEM files)."""
    if not Path(MOSQUITTO).exists():
        pytest.fail(f"the mosquitto binary is needed by this test and is not at {MOSQUITTO}")
    pki = tmp_path / "pki"
    pki.mkdir()
    ca_key = _key()
    ca = _cert("edgesync test CA", ca_key, None, ca_key, ca=True)
    _write(pki / "ca", ca, ca_key)
    for name, server in (("server", True), ("client", False)):
        k = _key()
        _write(pki / name, _cert(name, k, ca.subject, ca_key, server=server), k)
    port = _free_port()
    conf = tmp_path / "mosquitto.conf"
    conf.write_text(
        # started as root, mosquitto would drop to a user that cannot read tmp_path
        f"user {getpass.getuser()}\n"
        f"persistence false\nlog_dest stderr\nallow_anonymous true\n"
        f"listener {port} 127.0.0.1\n"
        f"cafile {pki / 'ca.pem'}\ncertfile {pki / 'server.pem'}\n"
        f"keyfile {pki / 'server.key'}\nrequire_certificate true\n")
    log = (tmp_path / "mosquitto.log").open("wb")
    proc = subprocess.Popen([MOSQUITTO, "-c", str(conf)], stdout=log, stderr=log)
    try:
        for _ in range(200):
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port),
                                                                        timeout=0.2):
                break
            if proc.poll() is not None:
                raise AssertionError((tmp_path / "mosquitto.log").read_text())
            time.sleep(0.05)
        yield port, pki
    finally:
        proc.terminate()
        proc.wait()
        log.close()


async def test_agent_publishes_over_mtls(tls_broker: tuple[int, Path], app: sqlite3.Connection,
                                         source_db: Path, tmp_path: Path,
                                         device_id: str) -> None:
    port, pki = tls_broker
    url = f"ssl://127.0.0.1:{port}"
    root = f"edgesync-test/{device_id}"
    cfg = AgentConfig(
        connection=ConnectionConfig(
            server_url=url, device_id=device_id, root_topic=root,
            tls_ca_cert_path=pki / "ca.pem", tls_client_cert_path=pki / "client.pem",
            tls_client_key_path=pki / "client.key"),
        replication=ReplicationConfig(source_db_path=source_db,
                                      state_db_path=tmp_path / "state.db"))
    app.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
    tls = TlsFiles(pki / "ca.pem", pki / "client.pem", pki / "client.key")
    obs = mqtt_client(parse_broker_url(url), identifier=f"{device_id}-observer",
                      clean_session=True, tls=tls)
    async with obs, Agent(cfg) as agent:
        await obs.subscribe(f"{root}/sync/rows/batch", qos=1)
        app.execute("INSERT INTO t VALUES (1, 'over tls')")
        async with asyncio.timeout(10):
            assert await agent.flush() == 1
        doc = await next_message(obs, f"{root}/sync/rows/batch")
        assert doc["rows"][0]["row"] == {"id": 1, "v": "over tls"}

    # without a client certificate the broker refuses the connection (under TLS 1.3 the
    # refusal comes after the client's handshake, so the client may only see no CONNACK)
    bare = mqtt_client(parse_broker_url(url), identifier=f"{device_id}-bare",
                       clean_session=True, tls=TlsFiles(pki / "ca.pem"))
    with pytest.raises((aiomqtt.MqttError, TimeoutError)):
        async with asyncio.timeout(2), bare:
            pass


async def test_the_workers_downlink_client_connects_over_mtls(
        tls_broker: tuple[int, Path], device_id: str) -> None:
    """The worker's publish-only client (``PublishingClient``, in ``protocol``) on the same
    listener: server certificate and hostname checked, client certificate presented."""
    port, pki = tls_broker
    tls = TlsFiles(pki / "ca.pem", pki / "client.pem", pki / "client.key")
    url = f"ssl://127.0.0.1:{port}"
    topic = f"edgesync-test/{device_id}/downlink"
    obs = mqtt_client(parse_broker_url(url), identifier=f"{device_id}-observer",
                      clean_session=True, tls=tls)
    async with obs:
        await obs.subscribe(topic, qos=1)
        async with PublishingClient("127.0.0.1", port, client_id=f"{device_id}-worker",
                                    tls_context=tls.context()) as client:
            await client.publish_all([(topic, b'{"over": "tls"}')])
        assert await next_message(obs, topic) == {"over": "tls"}
    with pytest.raises(BrokerError):  # a CA that did not sign the server's certificate
        other = pki.parent / "other"
        other.mkdir()
        k = _key()
        _write(other / "ca", _cert("another CA", k, None, k, ca=True), k)
        async with asyncio.timeout(10), PublishingClient(
                "127.0.0.1", port, client_id=f"{device_id}-stranger",
                tls_context=TlsFiles(other / "ca.pem").context()):
            pass


async def test_the_workers_uplink_client_consumes_over_mtls(
        tls_broker: tuple[int, Path], device_id: str) -> None:
    """The worker's consuming client (``ConsumingClient``) on the same listener, with the
    same TLS context as the downlink's."""
    port, pki = tls_broker
    tls = TlsFiles(pki / "ca.pem", pki / "client.pem", pki / "client.key")
    topic = f"edgesync-test/{device_id}/sync/rows/batch"
    async with ConsumingClient("127.0.0.1", port, client_id=f"{device_id}-worker",
                               tls_context=tls.context()) as worker:
        await worker.subscribe([topic])
        async with PublishingClient("127.0.0.1", port, client_id=device_id,
                                    tls_context=tls.context()) as device:
            await device.publish_all([(topic, b'{"over": "tls"}')])
        async with asyncio.timeout(10):
            [message] = await worker.receive()
        assert (message.topic, message.payload) == (topic, b'{"over": "tls"}')
        worker.finished(message)
