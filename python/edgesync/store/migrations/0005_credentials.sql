-- edgesync cloud schema, version 5: certificate authorities, device credentials (MQTT
-- passwords and mTLS certificates, revocable), JITR bootstrap certificates and the
-- broker's service accounts. See docs/security.md.

-- Certificate authorities. purpose:
--   server   one per deployment (project_id NULL): signs broker server certificates;
--            devices trust it to verify the broker.
--   project  one per project: signs JITR bootstrap certificates.
--   device   one per project: signs device MQTT client certificates; the only CA the
--            project's mTLS listener trusts.
-- key_pem is the CA's private key in clear: a real deployment keeps it in a KMS/HSM.
CREATE TABLE edge_certificate_authorities (
    id              uuid PRIMARY KEY,
    project_id      uuid REFERENCES edge_projects(id) ON DELETE CASCADE,
    purpose         text NOT NULL CHECK (purpose IN ('server', 'project', 'device')),
    cert_pem        text NOT NULL,
    key_pem         text NOT NULL,
    crl_number      bigint NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL DEFAULT now(),
    CHECK ((purpose = 'server') = (project_id IS NULL))
);
CREATE UNIQUE INDEX edge_certificate_authorities_project
    ON edge_certificate_authorities (project_id, purpose) WHERE project_id IS NOT NULL;
CREATE UNIQUE INDEX edge_certificate_authorities_server
    ON edge_certificate_authorities (purpose) WHERE project_id IS NULL;

-- JITR: a fleet bootstrap certificate enrolls up to max_devices devices until not_after.
-- Its private key is returned once and never stored.
CREATE TABLE edge_bootstrap_certificates (
    id                uuid PRIMARY KEY,
    project_id        uuid NOT NULL REFERENCES edge_projects(id) ON DELETE CASCADE,
    fleet_id          uuid NOT NULL REFERENCES edge_fleets(id) ON DELETE CASCADE,
    serial            text NOT NULL UNIQUE,
    fingerprint       text NOT NULL UNIQUE,
    cert_pem          text NOT NULL,
    max_devices       integer NOT NULL CHECK (max_devices BETWEEN 1 AND 1000),
    enrolled_devices  integer NOT NULL DEFAULT 0,
    not_after         timestamptz NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    revoked_at        timestamptz,
    CHECK (enrolled_devices BETWEEN 0 AND max_devices)
);
CREATE INDEX edge_bootstrap_certificates_fleet ON edge_bootstrap_certificates (fleet_id);

-- Device credentials. A password credential's username is the device name and only its
-- PBKDF2 hash (Mosquitto's $7$ format) is kept; a certificate credential keeps the
-- certificate (never its key). Revoked rows stay, for the CRL and the record.
CREATE TABLE edge_device_credentials (
    id                uuid PRIMARY KEY,
    device_id         uuid NOT NULL REFERENCES edge_devices(id) ON DELETE CASCADE,
    kind              text NOT NULL CHECK (kind IN ('password', 'certificate')),
    password_hash     text,
    cert_serial       text UNIQUE,
    cert_fingerprint  text,
    cert_pem          text,
    not_after         timestamptz,
    bootstrap_id      uuid REFERENCES edge_bootstrap_certificates(id) ON DELETE SET NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    revoked_at        timestamptz,
    revoke_reason     text,
    CHECK ((kind = 'password') = (password_hash IS NOT NULL)),
    CHECK ((kind = 'certificate') = (cert_pem IS NOT NULL AND cert_serial IS NOT NULL))
);
CREATE INDEX edge_device_credentials_device ON edge_device_credentials (device_id);
-- One live password per device: the broker's password file has one line per username.
CREATE UNIQUE INDEX edge_device_credentials_one_password
    ON edge_device_credentials (device_id) WHERE kind = 'password' AND revoked_at IS NULL;

-- Broker accounts that are not devices (the cloud worker).
CREATE TABLE edge_broker_accounts (
    username        text PRIMARY KEY,
    password_hash   text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    rotated_at      timestamptz
);
