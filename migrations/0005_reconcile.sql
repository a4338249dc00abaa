-- Reconcile runs: a manifest's plan, stored with its content, applied by the
-- workers one entry per transaction.

CREATE TYPE reconcile_status AS ENUM ('planned', 'applying', 'completed', 'failed');
CREATE TYPE plan_action AS ENUM ('add', 'noop', 'replace', 'delete');

CREATE TABLE reconcile_runs (
    id            uuid PRIMARY KEY,
    workspace_id  uuid NOT NULL REFERENCES workspaces (id),
    agent_id      uuid NOT NULL REFERENCES agents (id),
    status        reconcile_status NOT NULL,
    -- Plan entries applied so far (noops included), in plan order.
    checkpoint    integer NOT NULL DEFAULT 0,
    entries       integer NOT NULL CHECK (entries BETWEEN 0 AND 100),
    error_code    text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    -- Last progress, and when a job for it was last sent (for the sweeper).
    updated_at    timestamptz NOT NULL DEFAULT now(),
    enqueued_at   timestamptz NOT NULL DEFAULT now(),
    CHECK (checkpoint BETWEEN 0 AND entries),
    CHECK ((status = 'failed') = (error_code IS NOT NULL))
);

-- An Agent's runs still applying, oldest first: the one to apply next.
CREATE INDEX reconcile_runs_applying ON reconcile_runs (agent_id, id) WHERE status = 'applying';

CREATE TABLE reconcile_entries (
    run_id          uuid NOT NULL REFERENCES reconcile_runs (id),
    ordinal         integer NOT NULL,
    key             text NOT NULL,
    -- The plan as the API made it.
    action          plan_action NOT NULL,
    source_id       uuid,
    -- The entry: a tombstone (with its confirmation), or an upsert with its
    -- content, kept until the entry is applied.
    tombstone       boolean NOT NULL,
    confirm         text,
    title           text,
    provenance_kind provenance_kind,
    provenance_uri  text,
    revision        text,
    digest          text,
    required        boolean,
    content         text,
    -- What applying it did, against the state then.
    applied_action  plan_action,
    applied_source_id uuid,
    PRIMARY KEY (run_id, ordinal)
);

-- The source view also tells what its revisions weigh, for the usage a
-- reconcile plan would change.
CREATE OR REPLACE VIEW knowledge_source_view AS
SELECT s.id, s.workspace_id, s.agent_id, s.key,
       l.revision, l.digest, l.title, l.provenance_kind, l.provenance_uri, l.required, l.imported_at,
       a.id AS active_id, a.revision AS active_revision, a.digest AS active_digest, a.state AS active_state,
       a.imported_at AS active_imported_at, a.error_code AS active_error_code,
       c.id AS candidate_id, c.revision AS candidate_revision, c.digest AS candidate_digest,
       c.state AS candidate_state, c.imported_at AS candidate_imported_at, c.error_code AS candidate_error_code,
       l.state AS latest_state, a.content_bytes AS active_bytes, c.content_bytes AS candidate_bytes
FROM knowledge_sources s
JOIN knowledge_revisions l ON l.id = s.latest_revision_id
LEFT JOIN knowledge_revisions a ON a.id = s.active_revision_id
LEFT JOIN knowledge_revisions c ON c.id = s.candidate_revision_id
WHERE s.deleted_at IS NULL;
