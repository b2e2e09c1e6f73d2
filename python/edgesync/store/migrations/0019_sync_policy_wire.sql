-- What a sync policy's agents may put on the wire (issue 29), applied where the agent has
-- remote_policy: true; NULL leaves each agent's YAML setting. compression: 'none' or 'zstd'
-- (sqlite-replication.compression); max_bytes_per_second / max_bytes_per_day: the agent's
-- bandwidth budget (connection.*, 0: unlimited). Written by syncpolicy._policies.
ALTER TABLE edge_sync_policies ADD COLUMN compression text;
ALTER TABLE edge_sync_policies ADD CONSTRAINT edge_sync_policies_compression_check
    CHECK (compression IN ('none', 'zstd'));
ALTER TABLE edge_sync_policies ADD COLUMN max_bytes_per_second bigint
    CHECK (max_bytes_per_second >= 0);
ALTER TABLE edge_sync_policies ADD COLUMN max_bytes_per_day bigint
    CHECK (max_bytes_per_day >= 0);
