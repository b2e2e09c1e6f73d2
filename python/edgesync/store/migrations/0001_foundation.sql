-- edgesync cloud schema, version 1: registry, lineages, ledger, governance, staging, outbox.

CREATE TABLE edge_projects (
    id              uuid PRIMARY KEY,
    name            text NOT NULL UNIQUE,
    topic_slug      text NOT NULL UNIQUE,
    policy          jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE edge_fleets (
    id              uuid PRIMARY KEY,
    project_id      uuid NOT NULL REFERENCES edge_projects(id) ON DELETE CASCADE,
    name            text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (project_id, name)
);

CREATE TABLE edge_devices (
    id              uuid PRIMARY KEY,
    project_id      uuid NOT NULL REFERENCES edge_projects(id) ON DELETE CASCADE,
    fleet_id        uuid REFERENCES edge_fleets(id) ON DELETE SET NULL,
    name            text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (project_id, name)
);

CREATE TABLE edge_table_lineages (
    id                    uuid PRIMARY KEY,
    project_id            uuid NOT NULL REFERENCES edge_projects(id) ON DELETE CASCADE,
    fleet_id              uuid REFERENCES edge_fleets(id) ON DELETE SET NULL,
    device_id             uuid NOT NULL REFERENCES edge_devices(id) ON DELETE CASCADE,
    source_table          text NOT NULL,
    pipeline              text NOT NULL CHECK (pipeline IN ('rows', 'telemetry')),
    status                text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'paused')),
    pause_reason          text,
    paused_by_control     boolean NOT NULL DEFAULT false,
    current_schema_hash   text,
    approved_schema_hash  text,
    target_table          text,
    staged_rows           bigint NOT NULL DEFAULT 0,
    staged_bytes          bigint NOT NULL DEFAULT 0,
    materialized_rows     bigint NOT NULL DEFAULT 0,
    rejected_batches      bigint NOT NULL DEFAULT 0,
    materialization_errors integer NOT NULL DEFAULT 0,
    last_error            text,
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now(),
    UNIQUE (device_id, source_table)
);
CREATE INDEX edge_table_lineages_project ON edge_table_lineages (project_id, status);

-- The batch ledger: one row per batch a device sent, accepted or not.
CREATE TABLE edge_export_segments (
    id                bigserial PRIMARY KEY,
    device_id         uuid NOT NULL REFERENCES edge_devices(id) ON DELETE CASCADE,
    lineage_id        uuid REFERENCES edge_table_lineages(id) ON DELETE CASCADE,
    batch_id          uuid,
    topic_kind        text NOT NULL,
    source_table      text,
    outcome           text NOT NULL CHECK (outcome IN ('materialized', 'staged', 'rejected')),
    rejection_code    text,
    rejection_field   text,
    rejection_detail  text,
    schema_hash       text,
    journal_epoch     uuid,
    first_commit_seq  bigint,
    last_commit_seq   bigint,
    batch_seq         bigint,
    row_count         integer NOT NULL DEFAULT 0,
    payload_bytes     integer NOT NULL DEFAULT 0,
    received_at       timestamptz NOT NULL DEFAULT now()
);
-- Dedupe key. Rejected batches are kept for the record but never block a corrected resend.
CREATE UNIQUE INDEX edge_export_segments_dedupe
    ON edge_export_segments (device_id, batch_id) WHERE outcome <> 'rejected';
CREATE INDEX edge_export_segments_lineage ON edge_export_segments (lineage_id, id);

CREATE TABLE edge_schema_versions (
    id               uuid PRIMARY KEY,
    lineage_id       uuid NOT NULL REFERENCES edge_table_lineages(id) ON DELETE CASCADE,
    schema_hash      text NOT NULL,
    schema_columns   jsonb,
    classification   text NOT NULL CHECK (classification IN
                        ('compatible_additive', 'compatible_mapped', 'ambiguous', 'breaking', 'unknown')),
    diff             jsonb NOT NULL DEFAULT '{}'::jsonb,
    status           text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'approved', 'rejected')),
    first_seen_at    timestamptz NOT NULL DEFAULT now(),
    UNIQUE (lineage_id, schema_hash)
);

CREATE TABLE edge_schema_reviews (
    id                 uuid PRIMARY KEY,
    lineage_id         uuid NOT NULL REFERENCES edge_table_lineages(id) ON DELETE CASCADE,
    schema_version_id  uuid NOT NULL REFERENCES edge_schema_versions(id) ON DELETE CASCADE,
    schema_hash        text NOT NULL,
    classification     text NOT NULL,
    status             text NOT NULL DEFAULT 'queued' CHECK (status IN
                          ('queued', 'in_review', 'approved', 'rejected', 'abandoned')),
    action_version     integer NOT NULL DEFAULT 1,
    claimed_by         text,
    column_actions     jsonb,
    decided_by         text,
    decision_reason    text,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX edge_schema_reviews_open
    ON edge_schema_reviews (lineage_id, schema_hash) WHERE status IN ('queued', 'in_review');

CREATE TABLE edge_column_bindings (
    id                  uuid PRIMARY KEY,
    lineage_id          uuid NOT NULL REFERENCES edge_table_lineages(id) ON DELETE CASCADE,
    schema_hash         text NOT NULL,
    source_column_name  text NOT NULL,
    action              text NOT NULL CHECK (action IN
                           ('mirror', 'map', 'ignore', 'defer', 'auto_create_and_map')),
    mirror_column_name  text,
    target_type         text,
    device_data_point_id uuid,
    created_at          timestamptz NOT NULL DEFAULT now(),
    UNIQUE (lineage_id, schema_hash, source_column_name)
);

CREATE TABLE edge_replay_intents (
    id             uuid PRIMARY KEY,
    lineage_id     uuid NOT NULL REFERENCES edge_table_lineages(id) ON DELETE CASCADE,
    review_id      uuid REFERENCES edge_schema_reviews(id) ON DELETE SET NULL,
    status         text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'done', 'failed')),
    rows_replayed  bigint NOT NULL DEFAULT 0,
    last_error     text,
    created_at     timestamptz NOT NULL DEFAULT now(),
    completed_at   timestamptz
);
CREATE INDEX edge_replay_intents_pending ON edge_replay_intents (created_at) WHERE status = 'pending';

-- Transactional outbox of downlink controls.
CREATE TABLE edge_pending_controls (
    id            uuid PRIMARY KEY,
    device_id     uuid NOT NULL REFERENCES edge_devices(id) ON DELETE CASCADE,
    lineage_id    uuid REFERENCES edge_table_lineages(id) ON DELETE CASCADE,
    control_kind  text NOT NULL,
    body          jsonb NOT NULL,
    status        text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'acked', 'superseded')),
    attempts      integer NOT NULL DEFAULT 0,
    last_sent_at  timestamptz,
    acked_at      timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX edge_pending_controls_open ON edge_pending_controls (device_id, created_at)
    WHERE status = 'pending';

-- Row bodies waiting to be materialized: one zstd blob per received batch.
CREATE TABLE edge_staged_rows (
    id                bigserial PRIMARY KEY,
    lineage_id        uuid NOT NULL REFERENCES edge_table_lineages(id) ON DELETE CASCADE,
    device_id         uuid NOT NULL REFERENCES edge_devices(id) ON DELETE CASCADE,
    segment_id        bigint REFERENCES edge_export_segments(id) ON DELETE SET NULL,
    source_table      text NOT NULL,
    staging_reason    text NOT NULL CHECK (staging_reason IN
                         ('schema_review', 'lineage_paused', 'materialization_failed')),
    schema_hash       text NOT NULL,
    journal_epoch     uuid,
    first_commit_seq  bigint,
    last_commit_seq   bigint,
    first_event_ts    timestamptz,
    last_event_ts     timestamptz,
    row_count         integer NOT NULL,
    byte_count        integer NOT NULL,
    blob              bytea NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX edge_staged_rows_lineage ON edge_staged_rows (lineage_id, id);

CREATE TABLE edge_events (
    id           bigserial PRIMARY KEY,
    project_id   uuid NOT NULL,
    event_type   text NOT NULL,
    subject_id   uuid,
    body         jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX edge_events_project ON edge_events (project_id, id);
