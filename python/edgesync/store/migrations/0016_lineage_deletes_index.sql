-- Lineage deletes by (device, table), for the recovery offers of a lineage re-created
-- after one (docs/recovery.md, "Offered at the right moment"; control._offers): without
-- it, a lineage detail would scan every event of its project.
CREATE INDEX edge_events_lineage_deleted ON edge_events
    (project_id, (body->>'device_id'), (body->>'source_table'))
    WHERE event_type = 'edgesync.table_lineage.deleted.v1';
