-- edgesync cloud schema, version 2: telemetry batches (sync/telemetry/batch).

-- batch_seq rules per (device, source table): at most one accepted batch per batch_seq
-- (a backstop for duplicate_batch_seq), and the highest accepted one is an index probe
-- (stale_batch_seq). Row batches leave batch_seq NULL.
CREATE UNIQUE INDEX edge_export_segments_batch_seq
    ON edge_export_segments (device_id, source_table, batch_seq)
    WHERE batch_seq IS NOT NULL AND outcome <> 'rejected';

-- Staged telemetry batches sit next to staged row batches of the same lineage; replay
-- drains telemetry first. first_event_ts / last_event_ts (0001) carry their time range.
ALTER TABLE edge_staged_rows
    ADD COLUMN pipeline text NOT NULL DEFAULT 'rows' CHECK (pipeline IN ('rows', 'telemetry')),
    ADD COLUMN batch_seq bigint;
