-- Large objects devices upload over HTTP (bootstrap snapshots, payload spills).

CREATE TABLE edge_uploads (
    id              uuid PRIMARY KEY,            -- also the batch_id the device finalizes
    device_id       uuid NOT NULL REFERENCES edge_devices(id) ON DELETE CASCADE,
    source_table    text NOT NULL,
    segment_kind    text NOT NULL CHECK (segment_kind IN ('bootstrap_snapshot', 'payload_spill')),
    status          text NOT NULL DEFAULT 'granted' CHECK (status IN
                       ('granted', 'uploaded', 'ingested', 'failed')),
    expires_at      timestamptz NOT NULL,
    byte_count      bigint,
    rows_ingested   bigint NOT NULL DEFAULT 0,
    last_error      text,
    finalized_at    timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX edge_uploads_device ON edge_uploads (device_id, created_at);

-- Server-wide secrets shared by every worker (e.g. the key that signs upload URLs).
CREATE TABLE edge_server_secrets (
    name        text PRIMARY KEY,
    value       bytea NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
