-- A source row carries what a read of the source shows of its revisions: the
-- latest revision's fields (the resource's top level), and the active and
-- candidate revisions' revision, digest, import time and size, with the
-- candidate's state and error code. A read (knowledge_source.wait's above all,
-- polled again and again) is then one index lookup of one row, not three.
--
-- The store writes these together with what they mirror, in one statement or
-- one transaction that holds the source row: a revision's fields never change
-- once it is stored, so only becoming latest, candidate or active copies them,
-- and only a candidate's state and error code change afterwards (processing,
-- failed). The active revision's state is always `active` while it is active.

-- The backfill below may queue deferred foreign-key checks of the rows it
-- updates; checked at once instead, they leave the table free to alter.
SET CONSTRAINTS ALL IMMEDIATE;

ALTER TABLE knowledge_sources
    ADD COLUMN revision              text,
    ADD COLUMN digest                text,
    ADD COLUMN title                 text,
    ADD COLUMN provenance_kind       provenance_kind,
    ADD COLUMN provenance_uri        text,
    ADD COLUMN required              boolean,
    ADD COLUMN imported_at           timestamptz,
    ADD COLUMN active_revision       text,
    ADD COLUMN active_digest         text,
    ADD COLUMN active_imported_at    timestamptz,
    ADD COLUMN active_bytes          integer,
    ADD COLUMN candidate_revision    text,
    ADD COLUMN candidate_digest      text,
    ADD COLUMN candidate_state       revision_state,
    ADD COLUMN candidate_imported_at timestamptz,
    ADD COLUMN candidate_error_code  text,
    ADD COLUMN candidate_bytes       integer;

-- One pass: each row is rewritten once.
UPDATE knowledge_sources s
SET revision = x.revision, digest = x.digest, title = x.title, provenance_kind = x.provenance_kind,
    provenance_uri = x.provenance_uri, required = x.required, imported_at = x.imported_at,
    active_revision = x.active_revision, active_digest = x.active_digest,
    active_imported_at = x.active_imported_at, active_bytes = x.active_bytes,
    candidate_revision = x.candidate_revision, candidate_digest = x.candidate_digest,
    candidate_state = x.candidate_state, candidate_imported_at = x.candidate_imported_at,
    candidate_error_code = x.candidate_error_code, candidate_bytes = x.candidate_bytes
FROM (
    SELECT o.id, l.revision, l.digest, l.title, l.provenance_kind, l.provenance_uri, l.required, l.imported_at,
           a.revision AS active_revision, a.digest AS active_digest, a.imported_at AS active_imported_at,
           a.content_bytes AS active_bytes,
           c.revision AS candidate_revision, c.digest AS candidate_digest, c.state AS candidate_state,
           c.imported_at AS candidate_imported_at, c.error_code AS candidate_error_code,
           c.content_bytes AS candidate_bytes
    FROM knowledge_sources o
    JOIN knowledge_revisions l ON l.id = o.latest_revision_id
    LEFT JOIN knowledge_revisions a ON a.id = o.active_revision_id
    LEFT JOIN knowledge_revisions c ON c.id = o.candidate_revision_id
) x
WHERE x.id = s.id;

ALTER TABLE knowledge_sources
    ALTER COLUMN revision SET NOT NULL,
    ALTER COLUMN digest SET NOT NULL,
    ALTER COLUMN title SET NOT NULL,
    ALTER COLUMN provenance_kind SET NOT NULL,
    ALTER COLUMN provenance_uri SET NOT NULL,
    ALTER COLUMN required SET NOT NULL,
    ALTER COLUMN imported_at SET NOT NULL,
    -- A live source shows its active revision's fields exactly when it has
    -- one, and its candidate's likewise; a candidate is unfinished or failed,
    -- with an error code exactly when failed.
    ADD CONSTRAINT knowledge_sources_active_shown_check
        CHECK (deleted_at IS NOT NULL
               OR ((active_revision_id IS NULL) = (active_revision IS NULL)
                   AND (active_revision IS NULL) = (active_digest IS NULL)
                   AND (active_revision IS NULL) = (active_imported_at IS NULL)
                   AND (active_revision IS NULL) = (active_bytes IS NULL))),
    ADD CONSTRAINT knowledge_sources_candidate_shown_check
        CHECK (deleted_at IS NOT NULL
               OR ((candidate_revision_id IS NULL) = (candidate_revision IS NULL)
                   AND (candidate_revision IS NULL) = (candidate_digest IS NULL)
                   AND (candidate_revision IS NULL) = (candidate_state IS NULL)
                   AND (candidate_revision IS NULL) = (candidate_imported_at IS NULL)
                   AND (candidate_revision IS NULL) = (candidate_bytes IS NULL)
                   AND candidate_state IN ('pending', 'processing', 'failed')
                   AND (candidate_state IS NOT DISTINCT FROM 'failed') = (candidate_error_code IS NOT NULL)));

CREATE OR REPLACE VIEW knowledge_source_view AS
SELECT id, workspace_id, agent_id, key,
       revision, digest, title, provenance_kind, provenance_uri, required, imported_at,
       active_revision_id AS active_id, active_revision, active_digest,
       CASE WHEN active_revision_id IS NOT NULL THEN 'active'::revision_state END AS active_state,
       active_imported_at, NULL::text AS active_error_code,
       candidate_revision_id AS candidate_id, candidate_revision, candidate_digest,
       candidate_state, candidate_imported_at, candidate_error_code,
       coalesce(candidate_state, 'active') AS latest_state,
       active_bytes, candidate_bytes
FROM knowledge_sources
WHERE deleted_at IS NULL;
