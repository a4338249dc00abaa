-- Fair processing across Workspaces (docs/decisions.md, "Which revision a
-- worker takes next"). A job only wakes a worker; the worker takes the next
-- revision by a fair order: the Workspace with the fewest attempts running,
-- then the one whose last attempt started longest ago, then the oldest work.

-- When each Workspace last had an attempt started. Written only when an
-- attempt starts (never by an add), so it is no hot row for writers.
CREATE TABLE workspace_turns (
    workspace_id uuid PRIMARY KEY REFERENCES workspaces (id) ON DELETE CASCADE,
    served_at    timestamptz NOT NULL
);

-- A Workspace's unfinished revisions in the order they were added: the claim
-- walks the Workspaces with work along it and takes each one's first free.
CREATE INDEX knowledge_revisions_queue ON knowledge_revisions (workspace_id, imported_at, id)
    WHERE state IN ('pending', 'processing');

-- Attempts running, counted per Workspace at each claim.
CREATE INDEX knowledge_revisions_running ON knowledge_revisions (workspace_id)
    WHERE state = 'processing';
