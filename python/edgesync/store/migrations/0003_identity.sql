-- edgesync cloud schema, version 3: organizations, principals, API tokens, project
-- permissions, and the idempotency records of API mutations.

CREATE TABLE edge_organizations (
    id              uuid PRIMARY KEY,
    name            text NOT NULL UNIQUE,
    created_at      timestamptz NOT NULL DEFAULT now()
);

-- Projects made before identity existed (or by `edgesync devices add`) have no
-- organization until `edgesync admin bootstrap` adopts them; no API token can see them.
ALTER TABLE edge_projects
    ADD COLUMN org_id uuid REFERENCES edge_organizations(id) ON DELETE RESTRICT;
CREATE INDEX edge_projects_org ON edge_projects (org_id);

-- Users and service accounts. A principal belongs to one organization.
CREATE TABLE edge_principals (
    id              uuid PRIMARY KEY,
    org_id          uuid NOT NULL REFERENCES edge_organizations(id) ON DELETE CASCADE,
    kind            text NOT NULL CHECK (kind IN ('user', 'service_account')),
    name            text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (org_id, name)
);

-- API tokens: only the SHA-256 of the token is kept; the token itself is shown once.
CREATE TABLE edge_api_tokens (
    id              uuid PRIMARY KEY,
    principal_id    uuid NOT NULL REFERENCES edge_principals(id) ON DELETE CASCADE,
    token_hash      bytea NOT NULL UNIQUE CHECK (length(token_hash) = 32),
    token_prefix    text NOT NULL,
    description     text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    expires_at      timestamptz,
    revoked_at      timestamptz,
    last_used_at    timestamptz
);
CREATE INDEX edge_api_tokens_principal ON edge_api_tokens (principal_id);

CREATE TABLE edge_project_permissions (
    principal_id    uuid NOT NULL REFERENCES edge_principals(id) ON DELETE CASCADE,
    project_id      uuid NOT NULL REFERENCES edge_projects(id) ON DELETE CASCADE,
    permission      text NOT NULL CHECK (permission IN
                        ('PROJECT_CAN_READ', 'PROJECT_CAN_MANAGE_DEVICES')),
    granted_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (principal_id, project_id, permission)
);
CREATE INDEX edge_project_permissions_project ON edge_project_permissions (project_id);

-- One row per (principal, Idempotency-Key): the request's fingerprint and the first
-- response. Written in the mutation's own transaction, so a retry can never apply twice.
CREATE TABLE edge_idempotency_keys (
    principal_id    uuid NOT NULL REFERENCES edge_principals(id) ON DELETE CASCADE,
    idempotency_key text NOT NULL,
    request_hash    bytea NOT NULL,
    method          text NOT NULL,
    path            text NOT NULL,
    status_code     integer NOT NULL,
    response_body   bytea NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (principal_id, idempotency_key)
);
CREATE INDEX edge_idempotency_keys_created ON edge_idempotency_keys (created_at);
