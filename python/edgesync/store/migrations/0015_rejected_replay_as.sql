-- A rejected schema version an operator found compatible with an approved one: its
-- staged rows (and later batches) are written with that version's bindings
-- (docs/recovery.md, "Rows of a rejected schema version").
ALTER TABLE edge_schema_versions ADD COLUMN replay_as_schema_hash text;
