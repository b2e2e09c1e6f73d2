-- Re-snapshots on demand and device/cloud verification (docs/recovery.md).

CREATE TABLE edge_resnapshots (
    id                uuid PRIMARY KEY,              -- also the job_id of the control
    project_id        uuid NOT NULL,
    lineage_id        uuid NOT NULL REFERENCES edge_table_lineages(id) ON DELETE CASCADE,
    device_id         uuid NOT NULL REFERENCES edge_devices(id) ON DELETE CASCADE,
    filter            jsonb NOT NULL DEFAULT '{}',
    verification_id   uuid,                          -- a verify --repair
    status            text NOT NULL DEFAULT 'requested' CHECK (status IN
                         ('requested', 'running', 'completed', 'failed')),
    rows_sent         bigint NOT NULL DEFAULT 0,     -- rows the device read so far
    chunks            integer NOT NULL DEFAULT 0,
    journal_epoch     uuid,
    first_commit_seq  bigint,                        -- the journal range of its rows
    last_commit_seq   bigint,
    swept_rows        bigint,                        -- cloud rows the device no longer has
    error             text,
    requested_by      text,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    completed_at      timestamptz
);
CREATE INDEX edge_resnapshots_lineage ON edge_resnapshots (lineage_id, created_at);

CREATE TABLE edge_verifications (
    id                 uuid PRIMARY KEY,             -- also the job_id of the control
    project_id         uuid NOT NULL,
    lineage_id         uuid NOT NULL REFERENCES edge_table_lineages(id) ON DELETE CASCADE,
    device_id          uuid NOT NULL REFERENCES edge_devices(id) ON DELETE CASCADE,
    prefix             integer NOT NULL,
    columns            jsonb NOT NULL,               -- as the control names them
    skipped_columns    jsonb NOT NULL DEFAULT '[]',
    repair             boolean NOT NULL DEFAULT false,
    status             text NOT NULL DEFAULT 'requested' CHECK (status IN
                          ('requested', 'equal', 'different', 'failed')),
    device_rows        bigint,
    cloud_rows         bigint,
    differing_buckets  jsonb,
    changed_buckets    jsonb,                        -- cloud rows newer than the digest
    resnapshot_id      uuid,
    error              text,
    requested_by       text,
    created_at         timestamptz NOT NULL DEFAULT now(),
    completed_at       timestamptz
);
CREATE INDEX edge_verifications_lineage ON edge_verifications (lineage_id, created_at);
