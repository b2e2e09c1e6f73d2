-- What devices report besides data: schema observations and capture gaps.

CREATE TABLE edge_schema_observations (
    device_id      uuid NOT NULL REFERENCES edge_devices(id) ON DELETE CASCADE,
    source_table   text NOT NULL,
    schema_hash    text NOT NULL,
    observed_at    timestamptz,
    received_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (device_id, source_table, schema_hash)
);

-- A range of journaled changes the device lost (local retention exceeded, state lost).
CREATE TABLE edge_capture_gaps (
    id                bigserial PRIMARY KEY,
    device_id         uuid NOT NULL REFERENCES edge_devices(id) ON DELETE CASCADE,
    lineage_id        uuid REFERENCES edge_table_lineages(id) ON DELETE SET NULL,
    source_table      text NOT NULL,
    journal_epoch     uuid,
    first_commit_seq  bigint,
    last_commit_seq   bigint,
    reason            text,
    reported_at       timestamptz NOT NULL DEFAULT now(),
    resolved_at       timestamptz
);
CREATE INDEX edge_capture_gaps_open ON edge_capture_gaps (device_id) WHERE resolved_at IS NULL;
