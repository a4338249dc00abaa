-- The web application at /account (sign-in, first-time setup, members).
-- Every secret here is stored as its SHA-256 only: the cookie's session token,
-- the pending sign-in's browser binding, the invite token.

-- A browser's signed-in session. The identity comes from a verified ID token;
-- a User row may not exist yet (setup not finished), so it is keyed by
-- (issuer, subject) like `users`.
CREATE TABLE web_sessions (
    id          uuid PRIMARY KEY,
    token_hash  bytea NOT NULL UNIQUE CHECK (octet_length(token_hash) = 32),
    issuer      text NOT NULL,
    subject     text NOT NULL,
    email       text NOT NULL,
    name        text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL
);
CREATE INDEX web_sessions_expires_idx ON web_sessions (expires_at);

-- A sign-in under way: what the callback must find again (state, PKCE
-- verifier, nonce), bound to the browser that started it by a cookie.
CREATE TABLE web_sign_ins (
    binding_hash bytea PRIMARY KEY CHECK (octet_length(binding_hash) = 32),
    state        text NOT NULL,
    verifier     text NOT NULL,
    nonce        text NOT NULL,
    expires_at   timestamptz NOT NULL
);

-- Each sign-in deletes the expired ones: by index, however many were started.
CREATE INDEX web_sign_ins_expires_idx ON web_sign_ins (expires_at);

-- An invitation to join a Workspace with a role: single use, expiring.
CREATE TABLE workspace_invites (
    id           uuid PRIMARY KEY,
    workspace_id uuid NOT NULL REFERENCES workspaces (id),
    token_hash   bytea NOT NULL UNIQUE CHECK (octet_length(token_hash) = 32),
    role         member_role NOT NULL,
    created_by   uuid NOT NULL REFERENCES users (id),
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    used_at      timestamptz,
    used_by      uuid REFERENCES users (id),
    CHECK ((used_at IS NULL) = (used_by IS NULL))
);
CREATE INDEX workspace_invites_workspace_idx ON workspace_invites (workspace_id);
