-- Per-row quarantine (dead-letter rows): a row PostgreSQL or the COPY encoder refuses
-- is kept here with why, while the other rows of its batch and its lineage go on
-- (docs/recovery.md). One table for every project, scoped by project_id like every
-- edge_* table; written only by edgesync.quarantine.
CREATE TABLE edge_quarantined_rows (
    id              bigserial PRIMARY KEY,
    project_id      uuid NOT NULL REFERENCES edge_projects(id) ON DELETE CASCADE,
    lineage_id      uuid NOT NULL REFERENCES edge_table_lineages(id) ON DELETE CASCADE,
    device_id       uuid NOT NULL REFERENCES edge_devices(id) ON DELETE CASCADE,
    segment_id      bigint REFERENCES edge_export_segments(id) ON DELETE SET NULL,
    pipeline        text NOT NULL CHECK (pipeline IN ('rows', 'telemetry')),
    source_table    text NOT NULL,
    schema_hash     text NOT NULL,
    batch_id        uuid NOT NULL,
    -- State rows: the change and its key (supersession compares (epoch, seq)).
    journal_epoch   uuid,
    commit_seq      bigint,
    op              text,
    pk_hash         text,
    -- Telemetry rows.
    batch_seq       bigint,
    event_ts        timestamptz,
    row_id          uuid,
    -- The row object as the device sent it (edited: as the operator left it).
    row_json        text NOT NULL,
    -- A protocol rejection code (value_type_mismatch) or a PostgreSQL SQLSTATE.
    reason_code     text NOT NULL,
    reason          text NOT NULL,
    reason_field    text,
    status          text NOT NULL DEFAULT 'open'
                        CHECK (status IN ('open', 'superseded', 'retried')),
    attempts        integer NOT NULL DEFAULT 0,
    edited_by       text,
    resolved_by     text,
    quarantined_at  timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    resolved_at     timestamptz
);
CREATE INDEX edge_quarantined_rows_lineage ON edge_quarantined_rows (lineage_id, status, id);
CREATE INDEX edge_quarantined_rows_key ON edge_quarantined_rows (lineage_id, pk_hash)
    WHERE status = 'open';
CREATE INDEX edge_quarantined_rows_project ON edge_quarantined_rows (project_id, status);

-- The ledger row of a batch settles as materialized; this many of its rows were
-- quarantined instead of written.
ALTER TABLE edge_export_segments ADD COLUMN quarantined_rows integer NOT NULL DEFAULT 0;
