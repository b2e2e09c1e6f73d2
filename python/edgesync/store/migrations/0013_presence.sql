-- Freshness and device status (docs/operations.md "Freshness" and "Device status").
-- Written only by edgesync.observe._presence, from figures the ingest workers aggregate
-- in memory and flush every second (never a statement per message).

-- Per lineage: the newest committed batch's cloud commit, and the device-side time and
-- lag of the newest one that carried first_seen_at_ms.
CREATE TABLE edge_lineage_freshness (
    lineage_id           uuid PRIMARY KEY REFERENCES edge_table_lineages(id) ON DELETE CASCADE,
    -- when the device's agent first saw the batch's oldest change (first_seen_at_ms);
    -- NULL when the agent does not stamp its batches (the extension is optional)
    last_device_seen_at  timestamptz,
    last_committed_at    timestamptz NOT NULL,
    -- that stamped batch's commit - last_device_seen_at, in seconds
    freshness_seconds    double precision
);

-- Per device: when it was last heard from (any batch, ACK or status report) and its
-- agent's last status report (request_kind "status" on sync/ingest/request).
CREATE TABLE edge_device_status (
    device_id          uuid PRIMARY KEY REFERENCES edge_devices(id) ON DELETE CASCADE,
    -- NULL when only its MQTT will was heard of (the broker speaking for it)
    last_seen_at       timestamptz,
    last_batch_at      timestamptz,
    last_ack_at        timestamptz,
    last_report_at     timestamptz,
    -- false after the agent said goodbye (clean stop, or its MQTT will) and nothing since
    online             boolean NOT NULL DEFAULT true,
    online_at          timestamptz NOT NULL,  -- the event that decided online
    report             jsonb
);
