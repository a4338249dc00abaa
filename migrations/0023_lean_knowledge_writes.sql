-- Every add and every promotion paid for checks that proved nothing another
-- check had not already proved (a profile of PostgreSQL during
-- `svc-bench adds`: foreign-key triggers and CHECK expressions, which
-- PostgreSQL reads back from the catalog text for every statement, were a
-- fifth of its time).
--
-- Foreign keys implied by another:
-- - a revision's Agent and Workspace are its source's (every insert takes
--   them from the source it references, checked by
--   knowledge_revisions_source_id_fkey), and the source's Agent is checked
--   by knowledge_sources_agent_id_fkey;
-- - a source's Workspace is its Agent's (the add reads the Agent by id and
--   Workspace), and the Agent's is checked by agents_workspace_id_fkey.
-- Deletes stay guarded: a Workspace cannot go while an Agent references it,
-- nor an Agent while a source does, nor a source while a revision does.
--
-- The two CHECKs of what a live source shows (migration 0010) say the same
-- with one count of NULLs each instead of a chain of comparisons.
--
-- Dropping and adding constraints locks the tables exclusively for a moment:
-- rather than queue every claim, add and answer behind a long transaction
-- while it waits, the migration gives up after 5 s (run it again).
SET LOCAL lock_timeout = '5s';

ALTER TABLE knowledge_revisions
    DROP CONSTRAINT knowledge_revisions_agent_id_fkey,
    DROP CONSTRAINT knowledge_revisions_workspace_id_fkey;

ALTER TABLE knowledge_sources
    DROP CONSTRAINT knowledge_sources_workspace_id_fkey,
    DROP CONSTRAINT knowledge_sources_active_shown_check,
    DROP CONSTRAINT knowledge_sources_candidate_shown_check,
    -- A live source shows its active revision's fields exactly when it has
    -- one, and its candidate's likewise; a candidate is unfinished or failed,
    -- with an error code exactly when failed.
    ADD CONSTRAINT knowledge_sources_active_shown_check
        CHECK (deleted_at IS NOT NULL
               OR num_nulls(active_revision_id, active_revision, active_digest, active_imported_at,
                            active_bytes) IN (0, 5)),
    ADD CONSTRAINT knowledge_sources_candidate_shown_check
        CHECK (deleted_at IS NOT NULL
               OR (num_nulls(candidate_revision_id, candidate_revision, candidate_digest, candidate_state,
                             candidate_imported_at, candidate_bytes) IN (0, 6)
                   AND candidate_state IN ('pending', 'processing', 'failed')
                   AND (candidate_state IS NOT DISTINCT FROM 'failed') = (candidate_error_code IS NOT NULL)));
