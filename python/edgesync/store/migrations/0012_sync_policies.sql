-- Sync policies (the reference console's "Edge Sync → Sync Policies"): a project object
-- holding the agent's table_strategies, attached to devices or fleets, written into device
-- bundles and sent to attached agents as a sync_policy control (docs/agent.md, "Remote
-- sync policy"). Both tables are written only by edgesync.syncpolicy.
CREATE TABLE edge_sync_policies (
    id                uuid PRIMARY KEY,
    project_id        uuid NOT NULL REFERENCES edge_projects(id) ON DELETE CASCADE,
    name              text NOT NULL,
    description       text NOT NULL DEFAULT '',
    -- {table: {"strategy": "rows"|"telemetry"|"ignore", "ts_column"?, "include_columns"?}}
    table_strategies  jsonb NOT NULL DEFAULT '{}',
    -- The sample database's tables and columns the strategies were picked from, if any:
    -- {table: [column, ...]}; ts_column and include_columns are checked against it.
    sample_tables     jsonb,
    -- Raised by every change; agents apply a sync_policy control only when newer.
    version           bigint NOT NULL DEFAULT 1,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    UNIQUE (project_id, name)
);

-- A policy attached to one device or to one fleet (its devices). A device's effective
-- policy is the one attached to the device itself, else the one of its fleet.
CREATE TABLE edge_sync_policy_attachments (
    id          uuid PRIMARY KEY,
    policy_id   uuid NOT NULL REFERENCES edge_sync_policies(id) ON DELETE CASCADE,
    device_id   uuid REFERENCES edge_devices(id) ON DELETE CASCADE,
    fleet_id    uuid REFERENCES edge_fleets(id) ON DELETE CASCADE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    CHECK ((device_id IS NULL) <> (fleet_id IS NULL))
);
CREATE UNIQUE INDEX edge_sync_policy_attachments_device
    ON edge_sync_policy_attachments (device_id) WHERE device_id IS NOT NULL;
CREATE UNIQUE INDEX edge_sync_policy_attachments_fleet
    ON edge_sync_policy_attachments (fleet_id) WHERE fleet_id IS NOT NULL;
CREATE INDEX edge_sync_policy_attachments_policy ON edge_sync_policy_attachments (policy_id);

-- Every sync_policy control takes the next number: an agent applies a control only when
-- its revision is above the last one it applied (a device may move between policies, so a
-- policy's own version cannot order them).
CREATE SEQUENCE edge_sync_policy_revisions;

-- A revoked device (edgesync.fleet.revoke_device): refused at ingest (the device
-- resolver) and, with its credentials revoked, at the broker. Kept for the record.
ALTER TABLE edge_devices ADD COLUMN revoked_at timestamptz;
