-- Workspace API keys: bound to one Workspace, carrying least-privilege scopes.
-- Only the SHA-256 of a key's secret is stored; the secret is shown once.
CREATE TABLE api_keys (
    id              uuid PRIMARY KEY,
    workspace_id    uuid NOT NULL REFERENCES workspaces (id),
    name            text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 50),
    -- The non-secret part after `svck_`, by which a presented key is found.
    public_id       text NOT NULL,
    secret_hash     bytea NOT NULL CHECK (octet_length(secret_hash) = 32),
    preset          text CHECK (preset IN ('read_only', 'operator')),
    scopes          text[] NOT NULL CHECK (cardinality(scopes) >= 1),
    created_by      uuid NOT NULL REFERENCES users (id),
    rotated_from_id uuid REFERENCES api_keys (id),
    created_at      timestamptz NOT NULL DEFAULT now(),
    last_used_at    timestamptz,
    revoked_at      timestamptz,
    CONSTRAINT api_keys_public_id_key UNIQUE (public_id)
);

CREATE INDEX api_keys_workspace_idx ON api_keys (workspace_id, id);
