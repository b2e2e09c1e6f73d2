"""Certificate authorities, leaf certificates, CSR checks and CRLs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID

from edgesync.credentials import make_csr, new_key
from edgesync.credentials._x509 import (
    build_crl,
    cert_serial_hex,
    common_name,
    issue_leaf,
    load_cert,
    load_csr,
    new_ca,
    signed_by,
)
from edgesync.errors import InvalidRequestError


def test_ca_signs_client_and_server_certificates() -> None:
    ca = new_ca("test CA")
    ca_cert = ca.cert
    bc = ca_cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    assert bc.ca and bc.path_length == 0
    client = issue_leaf(ca, new_key().public_key(), "dev-a", days=30)
    cert = load_cert(client.cert_pem, "c")
    assert common_name(cert.subject) == "dev-a"
    assert signed_by(cert, ca_cert)
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    server = load_cert(issue_leaf(ca, new_key().public_key(), "mqtt.example", days=30,
                                  client=False, dns_names=["mqtt.example", "127.0.0.1"]
                                  ).cert_pem, "s")
    sans = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["mqtt.example"]
    assert [str(a) for a in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert not signed_by(cert, new_ca("test CA").cert)  # same name, other key


def test_leaf_never_outlives_its_ca() -> None:
    ca = new_ca("short CA", days=10)
    leaf = issue_leaf(ca, new_key().public_key(), "dev", days=365)
    assert leaf.not_after == ca.cert.not_valid_after_utc


def test_csr_checks() -> None:
    csr = load_csr(make_csr(new_key(), "dev-a"))
    assert common_name(csr.subject) == "dev-a"
    with pytest.raises(InvalidRequestError, match="PEM"):
        load_csr("not a csr")
    weak = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    from cryptography.hazmat.primitives import hashes, serialization

    def pem(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey) -> str:
        return x509.CertificateSigningRequestBuilder().subject_name(
            x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, "d")])).sign(
            key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM).decode()

    with pytest.raises(InvalidRequestError, match="2048"):
        load_csr(pem(weak))
    with pytest.raises(InvalidRequestError, match="curve"):
        load_csr(pem(ec.generate_private_key(ec.SECP521R1())))


def test_crl_lists_revoked_serials() -> None:
    ca = new_ca("crl CA")
    leaf = issue_leaf(ca, new_key().public_key(), "dev", days=30)
    now = datetime.now(UTC)
    crl = x509.load_pem_x509_crl(build_crl(ca, [(leaf.serial_hex, now)], number=7,
                                           days=30).encode())
    assert crl.is_signature_valid(ca.key.public_key())
    entry = crl.get_revoked_certificate_by_serial_number(int(leaf.serial_hex, 16))
    assert entry is not None
    assert crl.extensions.get_extension_for_class(x509.CRLNumber).value.crl_number == 7
    assert crl.next_update_utc is not None
    assert crl.next_update_utc > now + timedelta(days=29)
    assert cert_serial_hex(load_cert(leaf.cert_pem, "c")) == leaf.serial_hex
