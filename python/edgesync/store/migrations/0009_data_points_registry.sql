-- Device data points (column actions map / auto_create_and_map) and registry coalescing.

-- A project's data points: named, typed values a device reports, whatever table they come from.
CREATE TABLE edge_device_data_points (
    id          uuid PRIMARY KEY,
    project_id  uuid NOT NULL REFERENCES edge_projects(id) ON DELETE CASCADE,
    name        text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    value_type  text NOT NULL CHECK (value_type IN
                   ('integer', 'real', 'numeric', 'text', 'boolean', 'blob', 'json')),
    unit        text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (project_id, name)
);

-- Mapped values per device and time. source_key names the source row (the state row's
-- source_pk_hash, or the telemetry row_id), source_version the change of that row
-- ('{journal_epoch}/{commit_seq}' for state rows, '' for telemetry rows, which never
-- change): writing the same change twice is a no-op (ON CONFLICT DO NOTHING).
CREATE TABLE edge_data_point_values (
    data_point_id   uuid NOT NULL REFERENCES edge_device_data_points(id) ON DELETE CASCADE,
    device_id       uuid NOT NULL REFERENCES edge_devices(id) ON DELETE CASCADE,
    source_key      text NOT NULL,
    source_version  text NOT NULL DEFAULT '',
    ts              timestamptz NOT NULL,
    value           jsonb,
    PRIMARY KEY (data_point_id, device_id, source_key, source_version)
);
CREATE INDEX edge_data_point_values_read ON edge_data_point_values (data_point_id, device_id, ts);

ALTER TABLE edge_column_bindings
    ADD CONSTRAINT edge_column_bindings_data_point
    FOREIGN KEY (device_data_point_id) REFERENCES edge_device_data_points(id);

-- Registry coalescing: one schema decision per (scope, pipeline, source table, hash), where
-- scope is the project or one fleet (scope_id is the project's or the fleet's id).
CREATE TABLE edge_schema_registry (
    id              uuid PRIMARY KEY,
    project_id      uuid NOT NULL REFERENCES edge_projects(id) ON DELETE CASCADE,
    fleet_id        uuid REFERENCES edge_fleets(id) ON DELETE CASCADE,
    scope           text NOT NULL CHECK (scope IN ('project', 'fleet')),
    scope_id        uuid NOT NULL,
    pipeline        text NOT NULL CHECK (pipeline IN ('rows', 'telemetry')),
    source_table    text NOT NULL,
    schema_hash     text NOT NULL,
    schema_columns  jsonb,
    classification  text NOT NULL,
    status          text NOT NULL DEFAULT 'pending' CHECK (status IN
                       ('pending', 'approved', 'rejected', 'abandoned')),
    target_table    text,
    column_actions  jsonb,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (scope_id, pipeline, source_table, schema_hash),
    CHECK ((scope = 'fleet') = (fleet_id IS NOT NULL))
);
CREATE INDEX edge_schema_registry_project ON edge_schema_registry (project_id, status);

CREATE TABLE edge_registry_reviews (
    id               uuid PRIMARY KEY,
    registry_id      uuid NOT NULL REFERENCES edge_schema_registry(id) ON DELETE CASCADE,
    project_id       uuid NOT NULL REFERENCES edge_projects(id) ON DELETE CASCADE,
    status           text NOT NULL DEFAULT 'queued' CHECK (status IN
                        ('queued', 'in_review', 'approved', 'rejected', 'abandoned')),
    action_version   integer NOT NULL DEFAULT 1,
    claimed_by       text,
    column_actions   jsonb,
    decided_by       text,
    decision_reason  text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX edge_registry_reviews_open
    ON edge_registry_reviews (registry_id) WHERE status IN ('queued', 'in_review');

-- A device's schema version decided by the registry (NULL: decided by a device review).
ALTER TABLE edge_schema_versions
    ADD COLUMN registry_id uuid REFERENCES edge_schema_registry(id) ON DELETE SET NULL;
CREATE INDEX edge_schema_versions_registry ON edge_schema_versions (registry_id)
    WHERE registry_id IS NOT NULL;

ALTER TABLE edge_replay_intents
    ADD COLUMN registry_review_id uuid REFERENCES edge_registry_reviews(id) ON DELETE SET NULL;
