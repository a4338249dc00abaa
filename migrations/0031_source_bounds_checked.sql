-- PostgreSQL refuses a value of the knowledge tables outside the contract's
-- bounds, whoever writes it: a key of 1 to 160 characters, a revision label
-- of 1 to 200, a title of 1 to 240, a provenance URI of 1 to 2,000, a digest
-- of the form `sha256:` and 64 lowercase hex digits, content of 1 to 750,000
-- bytes. The contract's input types refuse such a value first, with
-- `invalid_request`; these CHECKs are the last guard, for a writer that does
-- not go through them. Lengths are in characters, as the contract's JSON
-- Schemas count them.
--
-- Adding a CHECK locks its table exclusively for a moment: both tables are
-- taken in tries that wait at most 100 ms (as in migration 0023), so adds and
-- promotions queue behind the migration for no longer than that at a time.
-- The CHECKs are added NOT VALID, so nothing reads the tables under that
-- lock: they hold for every write from now on, and migration 0032 validates
-- the rows already there while reads and writes go on.
DO $$
BEGIN
    SET LOCAL lock_timeout = '100ms';
    FOR attempt IN 1..50 LOOP
        BEGIN
            LOCK TABLE knowledge_revisions, knowledge_sources IN ACCESS EXCLUSIVE MODE;
            RETURN;
        EXCEPTION WHEN lock_not_available THEN
            PERFORM pg_sleep(0.1);
        END;
    END LOOP;
    SET LOCAL lock_timeout = '3s';
    LOCK TABLE knowledge_revisions, knowledge_sources IN ACCESS EXCLUSIVE MODE;
END $$;
SET LOCAL lock_timeout = DEFAULT;

ALTER TABLE knowledge_revisions
    ADD CONSTRAINT knowledge_revisions_revision_check
        CHECK (char_length(revision) BETWEEN 1 AND 200) NOT VALID,
    ADD CONSTRAINT knowledge_revisions_digest_check
        CHECK (digest ~ '^sha256:[a-f0-9]{64}$') NOT VALID,
    ADD CONSTRAINT knowledge_revisions_title_check
        CHECK (char_length(title) BETWEEN 1 AND 240) NOT VALID,
    ADD CONSTRAINT knowledge_revisions_provenance_uri_check
        CHECK (char_length(provenance_uri) BETWEEN 1 AND 2000) NOT VALID,
    ADD CONSTRAINT knowledge_revisions_content_bytes_check
        CHECK (content_bytes BETWEEN 1 AND 750000) NOT VALID;

ALTER TABLE knowledge_sources
    ADD CONSTRAINT knowledge_sources_key_check
        CHECK (char_length(key) BETWEEN 1 AND 160) NOT VALID;
