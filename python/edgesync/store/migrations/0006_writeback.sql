-- Cloud state write-back: which side owns a state table, and the cloud's version counter.

ALTER TABLE edge_table_lineages
    ADD COLUMN sync_authority text NOT NULL DEFAULT 'device_authoritative'
        CHECK (sync_authority IN ('device_authoritative', 'cloud_authoritative')),
    ADD COLUMN cloud_version bigint NOT NULL DEFAULT 0;
