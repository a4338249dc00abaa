-- Knowledge Sources, their revisions, and the passages answers are found in.

-- GIN over (agent_id, search) lets one index scan find an Agent's matches.
CREATE EXTENSION IF NOT EXISTS btree_gin;

CREATE TYPE provenance_kind AS ENUM ('repository', 'url', 'manual');
-- `replaced`: an active revision a newer one took over from (never shown).
CREATE TYPE revision_state AS ENUM ('pending', 'processing', 'active', 'failed', 'replaced');

CREATE TABLE knowledge_sources (
    id                  uuid PRIMARY KEY,
    workspace_id        uuid NOT NULL REFERENCES workspaces (id),
    agent_id            uuid NOT NULL REFERENCES agents (id),
    key                 text NOT NULL CHECK (char_length(key) BETWEEN 1 AND 160),
    -- The latest submitted revision: the resource's top-level fields.
    latest_revision_id  uuid NOT NULL,
    -- What answers use.
    active_revision_id  uuid,
    -- A candidate being processed, or the last one that failed (`pendingRevision`).
    candidate_revision_id uuid,
    created_at          timestamptz NOT NULL DEFAULT now(),
    deleted_at          timestamptz
);

-- Keys are unique among an Agent's live sources; lists walk them by id.
CREATE UNIQUE INDEX knowledge_sources_live_key ON knowledge_sources (agent_id, key) WHERE deleted_at IS NULL;
CREATE INDEX knowledge_sources_live ON knowledge_sources (agent_id, id) WHERE deleted_at IS NULL;

CREATE TABLE knowledge_revisions (
    id              uuid PRIMARY KEY,
    source_id       uuid NOT NULL REFERENCES knowledge_sources (id),
    workspace_id    uuid NOT NULL REFERENCES workspaces (id),
    agent_id        uuid NOT NULL REFERENCES agents (id),
    revision        text NOT NULL CHECK (char_length(revision) BETWEEN 1 AND 200),
    digest          text NOT NULL CHECK (digest ~ '^sha256:[a-f0-9]{64}$'),
    title           text NOT NULL CHECK (char_length(title) BETWEEN 1 AND 240),
    provenance_kind provenance_kind NOT NULL,
    provenance_uri  text NOT NULL CHECK (char_length(provenance_uri) BETWEEN 1 AND 2000),
    required        boolean NOT NULL,
    -- Kept while the revision is pending, processing or active; dropped after.
    content         text,
    content_bytes   integer NOT NULL CHECK (content_bytes BETWEEN 1 AND 750000),
    state           revision_state NOT NULL DEFAULT 'pending',
    error_code      text,
    imported_at     timestamptz NOT NULL DEFAULT now(),
    -- Processing: attempts started (counted here, not by the queue), the worker
    -- holding it and until when, and when a job for it was last enqueued.
    attempts        integer NOT NULL DEFAULT 0,
    lease_owner     text,
    lease_until     timestamptz,
    enqueued_at     timestamptz NOT NULL DEFAULT now(),
    -- Once active: the language its passages were indexed in, and their size.
    language        agent_language,
    passages        integer NOT NULL DEFAULT 0,
    tokens          bigint NOT NULL DEFAULT 0,
    CHECK ((state = 'failed') = (error_code IS NOT NULL))
);

-- A source and its first revision reference each other: the source's
-- references are checked at commit.
ALTER TABLE knowledge_sources
    ADD CONSTRAINT knowledge_sources_latest_fkey FOREIGN KEY (latest_revision_id)
        REFERENCES knowledge_revisions (id) DEFERRABLE INITIALLY DEFERRED,
    ADD CONSTRAINT knowledge_sources_active_fkey FOREIGN KEY (active_revision_id)
        REFERENCES knowledge_revisions (id),
    ADD CONSTRAINT knowledge_sources_candidate_fkey FOREIGN KEY (candidate_revision_id)
        REFERENCES knowledge_revisions (id) DEFERRABLE INITIALLY DEFERRED;

-- Work not finished: what the sweeper and the queue-depth figures read.
CREATE INDEX knowledge_revisions_unfinished ON knowledge_revisions (enqueued_at)
    WHERE state IN ('pending', 'processing');
-- An Agent's active revisions, with the sizes ranking needs.
CREATE INDEX knowledge_revisions_active ON knowledge_revisions (agent_id, language)
    INCLUDE (passages, tokens) WHERE state = 'active';

-- The passages of active revisions only: a revision's passages are written in
-- the transaction that makes it active and deleted in the one that replaces it.
CREATE TABLE knowledge_passages (
    revision_id uuid NOT NULL REFERENCES knowledge_revisions (id),
    ordinal     integer NOT NULL,
    agent_id    uuid NOT NULL,
    source_id   uuid NOT NULL,
    language    agent_language NOT NULL,
    heading     text,
    body        text NOT NULL,
    -- Title (weight A), heading and body, in the revision's language.
    search      tsvector NOT NULL,
    -- Word occurrences in `search` (the document length of BM25).
    tokens      integer NOT NULL,
    PRIMARY KEY (revision_id, ordinal)
);

CREATE INDEX knowledge_passages_search ON knowledge_passages USING gin (agent_id, search);

-- How many passages of each active revision hold each lexeme: summed over an
-- Agent's active revisions, the document frequencies of BM25.
CREATE TABLE knowledge_terms (
    agent_id    uuid NOT NULL,
    language    agent_language NOT NULL,
    lexeme      text NOT NULL,
    revision_id uuid NOT NULL REFERENCES knowledge_revisions (id),
    passages    integer NOT NULL,
    PRIMARY KEY (agent_id, language, lexeme, revision_id)
);

CREATE INDEX knowledge_terms_revision ON knowledge_terms (revision_id);

-- A live source with its latest, active and candidate revisions, as the
-- resource shows them.
CREATE VIEW knowledge_source_view AS
SELECT s.id, s.workspace_id, s.agent_id, s.key,
       l.revision, l.digest, l.title, l.provenance_kind, l.provenance_uri, l.required, l.imported_at,
       a.id AS active_id, a.revision AS active_revision, a.digest AS active_digest, a.state AS active_state,
       a.imported_at AS active_imported_at, a.error_code AS active_error_code,
       c.id AS candidate_id, c.revision AS candidate_revision, c.digest AS candidate_digest,
       c.state AS candidate_state, c.imported_at AS candidate_imported_at, c.error_code AS candidate_error_code
FROM knowledge_sources s
JOIN knowledge_revisions l ON l.id = s.latest_revision_id
LEFT JOIN knowledge_revisions a ON a.id = s.active_revision_id
LEFT JOIN knowledge_revisions c ON c.id = s.candidate_revision_id
WHERE s.deleted_at IS NULL;
