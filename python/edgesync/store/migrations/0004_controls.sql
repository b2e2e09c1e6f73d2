-- Downlink controls: per-device signing material and the outbox's delivery bookkeeping.

ALTER TABLE edge_devices
    ADD COLUMN signed_control boolean NOT NULL DEFAULT false,
    -- HMAC key for signed controls (the device's provisioned auth token). A secret:
    -- never returned by the API.
    ADD COLUMN control_token text,
    ADD COLUMN control_seq bigint NOT NULL DEFAULT 0;

ALTER TABLE edge_pending_controls
    ADD COLUMN sig_seq bigint,
    ADD COLUMN last_error text;


-- Every time a batch is accepted or seen again, it takes a new number from this sequence;
-- the progress reporter confirms batches to devices in that order (a re-sent batch is
-- confirmed again, which is what lets the device stop re-sending it).
CREATE SEQUENCE edge_export_segments_seen_seq;
ALTER TABLE edge_export_segments
    ADD COLUMN seen_seq bigint NOT NULL DEFAULT nextval('edge_export_segments_seen_seq');
CREATE INDEX edge_export_segments_seen ON edge_export_segments (seen_seq);
