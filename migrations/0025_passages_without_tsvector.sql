-- A passage's tsvector (title, heading and body as text search reads them)
-- was stored with every passage, though nothing has read it since ranking
-- moved to the postings (migration 0008 dropped its GIN index): it is larger
-- than the text itself (680 bytes for a 502-byte abstract), and every
-- promotion wrote it and its WAL. Promotions now compute it, take the
-- postings and the sizes from it, and store an empty one (a few bytes), so
-- a worker of this release also works on the schema before this migration
-- (a rolling update may start it before the migration has run).
--
-- The column only loses NOT NULL here, so that the next release may leave
-- it out and a later one drop it (expand, then contract): the release
-- before this one, still writing it during a rolling update, keeps working.
--
-- Dropping NOT NULL locks the table exclusively for a moment; tries wait at
-- most 100 ms each, so answers and promotions queue behind the migration for
-- no longer than that at a time (as in migration 0023).
DO $$
BEGIN
    SET LOCAL lock_timeout = '100ms';
    FOR attempt IN 1..50 LOOP
        BEGIN
            LOCK TABLE knowledge_passages IN ACCESS EXCLUSIVE MODE;
            RETURN;
        EXCEPTION WHEN lock_not_available THEN
            PERFORM pg_sleep(0.1);
        END;
    END LOOP;
    SET LOCAL lock_timeout = '3s';
    LOCK TABLE knowledge_passages IN ACCESS EXCLUSIVE MODE;
END $$;
SET LOCAL lock_timeout = DEFAULT;

ALTER TABLE knowledge_passages ALTER COLUMN search DROP NOT NULL;
COMMENT ON COLUMN knowledge_passages.search IS
    'Unused since migration 0025 (empty in new rows); to be dropped by a later release.';
