"""Device credentials: certificate authorities, MQTT passwords and client certificates,
revocation, JITR bootstrap certificates and enrollment, device bundles, and the broker
configuration that enforces them. See docs/security.md."""

from edgesync.credentials._authorities import get_ca, server_ca
from edgesync.credentials._bootstrap import (
    BOOTSTRAP_DAYS,
    BootstrapCertificate,
    BootstrapSecret,
    issue_bootstrap,
    list_bootstraps,
    revoke_bootstrap,
)
from edgesync.credentials._broker_material import (
    WORKER_USERNAME,
    BrokerConfigOptions,
    BrokerConfigResult,
    BrokerRefresh,
    write_broker_config,
)
from edgesync.credentials._bundle import BundleFiles, render_agent_yaml, write_bundle
from edgesync.credentials._control_token import ensure_control_token
from edgesync.credentials._device_credentials import (
    DEVICE_CERT_DAYS,
    CertificateSecret,
    DeviceCredential,
    PasswordSecret,
    find_device,
    find_project,
    issue_certificate,
    issue_password,
    list_credentials,
    revoke_credentials,
)
from edgesync.credentials._enrollment import Enrollment, EnrollmentError, enroll
from edgesync.credentials._issue_bundle import IssuedBundle, issue_bundle
from edgesync.credentials._passwords import hash_password, new_password, verify_password
from edgesync.credentials._x509 import CaMaterial, make_csr, new_key, private_key_pem

__all__ = [
    "BOOTSTRAP_DAYS",
    "DEVICE_CERT_DAYS",
    "WORKER_USERNAME",
    "BootstrapCertificate",
    "BootstrapSecret",
    "BrokerConfigOptions",
    "BrokerConfigResult",
    "BrokerRefresh",
    "BundleFiles",
    "CaMaterial",
    "CertificateSecret",
    "DeviceCredential",
    "Enrollment",
    "EnrollmentError",
    "IssuedBundle",
    "PasswordSecret",
    "enroll",
    "ensure_control_token",
    "find_device",
    "find_project",
    "get_ca",
    "hash_password",
    "issue_bootstrap",
    "issue_bundle",
    "issue_certificate",
    "issue_password",
    "list_bootstraps",
    "list_credentials",
    "make_csr",
    "new_key",
    "new_password",
    "private_key_pem",
    "render_agent_yaml",
    "revoke_bootstrap",
    "revoke_credentials",
    "server_ca",
    "verify_password",
    "write_broker_config",
    "write_bundle",
]
