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
-- Dropping a foreign key locks both its tables exclusively (here
-- workspaces, agents, knowledge_sources and knowledge_revisions), and so does
-- replacing a CHECK. All four are taken in one go, in tries that wait at most
-- 100 ms for each table and, failing, let go of what they took: requests
-- queue behind the migration for a fraction of a second at a time, and a
-- cycle with a request's locks is broken by the migration's timeout before
-- PostgreSQL's deadlock check (1 s) runs. The two tables (auto)vacuum works
-- on come first, so a try blocked by a vacuum holds nothing. After 50 tries
-- (10 to 25 s) a last one waits up to 3 s per table: long enough for
-- PostgreSQL to cancel an autovacuum in the way, which only a waiter past
-- deadlock_timeout does. If that fails too, the migration fails (run
-- `svc-api migrate` again). The CHECKs are added NOT VALID (no read of the
-- table under the lock) and validated by migration 0024, which lets reads
-- and writes go on.
DO $$
BEGIN
    SET LOCAL lock_timeout = '100ms';
    FOR attempt IN 1..50 LOOP
        BEGIN
            LOCK TABLE knowledge_revisions, knowledge_sources, agents, workspaces IN ACCESS EXCLUSIVE MODE;
            RETURN;
        EXCEPTION WHEN lock_not_available THEN
            PERFORM pg_sleep(0.1);
        END;
    END LOOP;
    SET LOCAL lock_timeout = '3s';
    LOCK TABLE knowledge_revisions, knowledge_sources, agents, workspaces IN ACCESS EXCLUSIVE MODE;
END $$;
SET LOCAL lock_timeout = DEFAULT;

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
                            active_bytes) IN (0, 5)) NOT VALID,
    ADD CONSTRAINT knowledge_sources_candidate_shown_check
        CHECK (deleted_at IS NOT NULL
               OR (num_nulls(candidate_revision_id, candidate_revision, candidate_digest, candidate_state,
                             candidate_imported_at, candidate_bytes) IN (0, 6)
                   AND candidate_state IN ('pending', 'processing', 'failed')
                   AND (candidate_state IS NOT DISTINCT FROM 'failed') = (candidate_error_code IS NOT NULL)))
        NOT VALID;
