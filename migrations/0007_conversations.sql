-- Conversations of the public answers endpoint and widget.verify: each one is
-- counted once toward `usage.conversations`; answers within it are not.
CREATE TABLE conversations (
    id           uuid PRIMARY KEY,
    workspace_id uuid NOT NULL REFERENCES workspaces (id),
    agent_id     uuid NOT NULL REFERENCES agents (id),
    created_at   timestamptz NOT NULL DEFAULT now()
);
