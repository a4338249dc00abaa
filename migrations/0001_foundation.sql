-- Users, Workspaces (with their Entitlements), memberships, Agents and
-- idempotency records.
-- Identifiers are UUIDv7 (time-ordered); the API shows them with a type prefix.

-- A User is identified by the identity provider's (issuer, subject). Sign-up and
-- setup belong to a separate web application (operators: `svc-api admin user-setup`).
CREATE TABLE users (
    id                  uuid PRIMARY KEY,
    issuer              text NOT NULL,
    subject             text NOT NULL,
    email               text NOT NULL,
    name                text,
    setup_completed_at  timestamptz,
    -- Tokens issued at or before this second are no longer accepted.
    sessions_revoked_at timestamptz,
    created_at          timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT users_identity_key UNIQUE (issuer, subject)
);

-- A Workspace with its Entitlement (1:1, and read on every request, so kept on
-- the same row). Status and activity of the Entitlement are derived from the plan
-- and dates (svc-core `entitlements`); `limit_overrides` holds operator-set limits.
CREATE TABLE workspaces (
    id                   uuid PRIMARY KEY,
    name                 text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 120),
    slug                 text NOT NULL,
    status               text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'archived')),
    created_at           timestamptz NOT NULL DEFAULT now(),
    plan                 text NOT NULL CHECK (plan IN ('trial', 'starter', 'pro', 'expired')),
    trial_end            timestamptz,
    period_end           timestamptz,
    cancel_at_period_end boolean NOT NULL DEFAULT false,
    limit_overrides      jsonb NOT NULL DEFAULT '{}'::jsonb,
    CONSTRAINT workspaces_slug_key UNIQUE (slug)
);

CREATE TABLE memberships (
    user_id      uuid NOT NULL REFERENCES users (id),
    workspace_id uuid NOT NULL REFERENCES workspaces (id),
    role         text NOT NULL CHECK (role IN ('owner', 'admin', 'member')),
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, workspace_id)
);

CREATE INDEX memberships_workspace_idx ON memberships (workspace_id);

CREATE TABLE agents (
    id               uuid PRIMARY KEY,
    workspace_id     uuid NOT NULL REFERENCES workspaces (id),
    name             text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 120),
    slug             text NOT NULL,
    default_language text NOT NULL CHECK (default_language IN ('en', 'es')),
    instructions     text CHECK (char_length(instructions) BETWEEN 1 AND 20000),
    temperature      double precision NOT NULL CHECK (temperature BETWEEN 0 AND 2),
    created_at       timestamptz NOT NULL DEFAULT now(),
    -- Soft delete: a deleted Agent is gone from list and inspect and frees its slug.
    deleted_at       timestamptz
);

CREATE UNIQUE INDEX agents_live_slug_key ON agents (workspace_id, slug) WHERE deleted_at IS NULL;
CREATE INDEX agents_live_idx ON agents (workspace_id, id) WHERE deleted_at IS NULL;

-- The stored result of a mutation, written in the mutation's own transaction.
-- `principal` is the id of the User or API key; ids are globally unique UUIDv7.
CREATE TABLE idempotency_records (
    principal   uuid NOT NULL,
    key         text NOT NULL,
    operation   text NOT NULL,
    fingerprint bytea NOT NULL,
    response    jsonb NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (principal, key)
);

CREATE INDEX idempotency_records_created_idx ON idempotency_records (created_at);
