-- Target columns an approval stopped writing (issue 27, "Retired columns are explicit"):
-- a breaking approval that drops or renames a mirrored column leaves the old column in the
-- target with its last values. Written by governance._retired at approval (a column mirrored
-- again is taken off); read by the lineage detail (retired_columns).
CREATE TABLE edge_retired_columns (
    lineage_id              uuid NOT NULL REFERENCES edge_table_lineages(id) ON DELETE CASCADE,
    target_table            text NOT NULL,
    column_name             text NOT NULL,
    pg_type                 text NOT NULL,
    source_column_name      text NOT NULL,
    retired_by_schema_hash  text NOT NULL,
    retired_at              timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (lineage_id, target_table, column_name)
);
