-- A sync policy's compression for its agents (issue 29): 'none' or 'zstd' (the agent's
-- sqlite-replication.compression, applied where the agent has remote_policy: true); NULL
-- leaves each agent's YAML setting. Written by syncpolicy._policies.
ALTER TABLE edge_sync_policies ADD COLUMN compression text;
ALTER TABLE edge_sync_policies ADD CONSTRAINT edge_sync_policies_compression_check
    CHECK (compression IN ('none', 'zstd'));
