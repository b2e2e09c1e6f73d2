"""X.509 building blocks: keys, certificate authorities, leaf certificates, CSRs, CRLs.

Pure functions over ``cryptography`` objects and PEM text; nothing here touches the
database. Every key is ECDSA P-256 unless a CSR brings its own (P-256/P-384 or RSA of
at least 2048 bits).
"""

from __future__ import annotations

import ipaddress
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from edgesync.errors import InvalidRequestError

__all__ = [
    "CaMaterial",
    "IssuedCert",
    "build_crl",
    "cert_fingerprint",
    "cert_serial_hex",
    "common_name",
    "issue_leaf",
    "load_cert",
    "load_csr",
    "make_csr",
    "new_ca",
    "new_key",
    "private_key_pem",
    "signed_by",
]

_CLOCK_SKEW = timedelta(minutes=5)


@dataclass(frozen=True, slots=True)
class CaMaterial:
    """A certificate authority: its certificate and private key (both PEM)."""

    cert_pem: str
    key_pem: str

    @property
    def cert(self) -> x509.Certificate:
        return load_cert(self.cert_pem, "ca_cert")

    @property
    def key(self) -> ec.EllipticCurvePrivateKey:
        key = serialization.load_pem_private_key(self.key_pem.encode(), password=None)
        assert isinstance(key, ec.EllipticCurvePrivateKey)
        return key


@dataclass(frozen=True, slots=True)
class IssuedCert:
    cert_pem: str
    serial_hex: str
    fingerprint: str
    not_after: datetime


def new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def private_key_pem(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def _pem(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def cert_serial_hex(cert: x509.Certificate) -> str:
    return format(cert.serial_number, "x")


def cert_fingerprint(cert: x509.Certificate) -> str:
    return cert.fingerprint(hashes.SHA256()).hex()


def _serial() -> int:
    # 159 random bits: positive, at most 20 octets, unguessable (RFC 5280 §4.1.2.2).
    return secrets.randbits(159) | 1 << 158


def _name(cn: str, org: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    if org:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


def new_ca(common: str, *, days: int = 3650, now: datetime | None = None) -> CaMaterial:
    """A self-signed CA that may sign leaf certificates and CRLs, not other CAs."""
    now = now or datetime.now(UTC)
    key = new_key()
    name = _name(common, "edgesync")
    cert = (
        x509.CertificateBuilder()
        .subject_name(name).issuer_name(name)
        .public_key(key.public_key())
        .serial_number(_serial())
        .not_valid_before(now - _CLOCK_SKEW)
        .not_valid_after(now + timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(
            digital_signature=False, content_commitment=False, key_encipherment=False,
            data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
            encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                       critical=False)
        .sign(key, hashes.SHA256())
    )
    return CaMaterial(_pem(cert), private_key_pem(key))


_PublicKey = ec.EllipticCurvePublicKey | rsa.RSAPublicKey


def _check_public_key(key: object) -> _PublicKey:
    if isinstance(key, ec.EllipticCurvePublicKey):
        if key.curve.name not in ("secp256r1", "secp384r1"):
            raise InvalidRequestError("csr_pem", f"EC curve {key.curve.name} is not accepted; "
                                                 "use P-256 or P-384")
        return key
    if isinstance(key, rsa.RSAPublicKey):
        if key.key_size < 2048:
            raise InvalidRequestError("csr_pem", "RSA keys must have at least 2048 bits")
        return key
    raise InvalidRequestError("csr_pem", "only ECDSA (P-256/P-384) and RSA keys are accepted")


def issue_leaf(ca: CaMaterial, public_key: object, common: str, *, days: int,
               client: bool = True, dns_names: Sequence[str] = (), org: str | None = None,
               now: datetime | None = None) -> IssuedCert:
    """Sign a client (``client=True``) or server certificate for ``public_key``."""
    now = now or datetime.now(UTC)
    pub = _check_public_key(public_key)
    ca_cert, ca_key = ca.cert, ca.key
    not_after = min(now + timedelta(days=days), ca_cert.not_valid_after_utc)
    eku = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common, org)).issuer_name(ca_cert.subject)
        .public_key(pub)
        .serial_number(_serial())
        .not_valid_before(now - _CLOCK_SKEW)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(
            digital_signature=True, content_commitment=False,
            key_encipherment=isinstance(pub, rsa.RSAPublicKey), data_encipherment=False,
            key_agreement=False, key_cert_sign=False, crl_sign=False, encipher_only=False,
            decipher_only=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([eku]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(pub), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
            ca_key.public_key()), critical=False)
    )
    if dns_names:
        builder = builder.add_extension(x509.SubjectAlternativeName(list(_sans(dns_names))),
                                        critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    return IssuedCert(_pem(cert), cert_serial_hex(cert), cert_fingerprint(cert),
                      cert.not_valid_after_utc)


def _sans(names: Iterable[str]) -> Iterable[x509.GeneralName]:
    for n in names:
        try:
            yield x509.IPAddress(ipaddress.ip_address(n))
        except ValueError:
            yield x509.DNSName(n)


def load_cert(pem: str, field: str) -> x509.Certificate:
    try:
        return x509.load_pem_x509_certificate(pem.encode())
    except ValueError as exc:
        raise InvalidRequestError(field, "not a PEM certificate") from exc


def load_csr(pem: str, field: str = "csr_pem") -> x509.CertificateSigningRequest:
    try:
        csr = x509.load_pem_x509_csr(pem.encode())
    except ValueError as exc:
        raise InvalidRequestError(field, "not a PEM certificate signing request") from exc
    if not csr.is_signature_valid:
        raise InvalidRequestError(field, "the CSR's signature does not match its key")
    _check_public_key(csr.public_key())
    return csr


def common_name(name: x509.Name) -> str | None:
    cns = name.get_attributes_for_oid(NameOID.COMMON_NAME)
    if len(cns) != 1:
        return None
    value = cns[0].value
    return value if isinstance(value, str) else None


def make_csr(key: ec.EllipticCurvePrivateKey, common: str) -> str:
    """A CSR as a device would make it (used by tests and the JITR client docs)."""
    csr = x509.CertificateSigningRequestBuilder().subject_name(_name(common)).sign(
        key, hashes.SHA256())
    return csr.public_bytes(serialization.Encoding.PEM).decode()


def signed_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    if cert.issuer != ca.subject:
        return False
    try:
        cert.verify_directly_issued_by(ca)
    except (InvalidSignature, ValueError, TypeError):
        return False
    return True


def build_crl(ca: CaMaterial, revoked: Iterable[tuple[str, datetime]], *, number: int,
              days: int, now: datetime | None = None) -> str:
    """A CRL of ``(serial_hex, revoked_at)`` pairs, valid for ``days``."""
    now = now or datetime.now(UTC)
    ca_cert = ca.cert
    builder = (
        x509.CertificateRevocationListBuilder()
        .issuer_name(ca_cert.subject)
        .last_update(now - _CLOCK_SKEW)
        .next_update(now + timedelta(days=days))
        .add_extension(x509.CRLNumber(number), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
            ca.key.public_key()), critical=False)
    )
    for serial_hex, when in revoked:
        builder = builder.add_revoked_certificate(
            x509.RevokedCertificateBuilder().serial_number(int(serial_hex, 16))
            .revocation_date(when).build())
    crl = builder.sign(ca.key, hashes.SHA256())
    return crl.public_bytes(serialization.Encoding.PEM).decode()
