-- Rows staged under a schema version an operator rejected are labelled so
-- (schema_rejected) instead of staying "schema_review" for ever; they can be discarded.
ALTER TABLE edge_staged_rows DROP CONSTRAINT edge_staged_rows_staging_reason_check;
ALTER TABLE edge_staged_rows ADD CONSTRAINT edge_staged_rows_staging_reason_check
    CHECK (staging_reason IN ('schema_review', 'schema_rejected', 'lineage_paused',
                              'materialization_failed'));
UPDATE edge_staged_rows s SET staging_reason = 'schema_rejected'
    FROM edge_schema_versions v
    WHERE v.lineage_id = s.lineage_id AND v.schema_hash = s.schema_hash
      AND v.status = 'rejected' AND s.staging_reason = 'schema_review';
