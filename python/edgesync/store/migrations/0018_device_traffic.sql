-- What each device's batches cost on the wire (docs/protocol.md "Compressed batches"):
-- bytes as received (zstd frames or plain JSON) and the same batches' JSON, both
-- cumulative since the device's first batch; their ratio is the device's compression.
ALTER TABLE edge_device_status
    ADD COLUMN batch_bytes_received bigint NOT NULL DEFAULT 0,
    ADD COLUMN batch_bytes_json bigint NOT NULL DEFAULT 0;
