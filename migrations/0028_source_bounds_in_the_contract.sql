-- The bounds of a single value written to the knowledge tables (a key of 1 to
-- 160 characters, a revision label of 1 to 200, a title of 1 to 240, a
-- provenance URI of 1 to 2,000, a digest's form, content of 1 to 750,000
-- bytes) are the contract's: every write of them comes through its input
-- types, which refuse a value out of bounds with `invalid_request` before
-- anything is written (tested at each boundary). PostgreSQL checked them a
-- second time, and a CHECK costs more than its test: it is read back from
-- the catalog's text and planned again for every statement that writes its
-- table (an add, and every claim and promotion of a revision). In a profile
-- of the add's statement under `pgbench` (eight clients), its CHECKs were 13%
-- of PostgreSQL's time, these six 6% of it; without them the statement ran
-- about 10% more adds a second.
--
-- What stays checked by PostgreSQL is what no single input can show and
-- code spread over several statements keeps: what a live source shows of
-- its revisions (`knowledge_sources_*_check`), a revision's error code
-- exactly when it failed, the transitions of its state, and the usage
-- shards' room, never below zero.
--
-- Dropping a CHECK locks its table exclusively for a moment: tries wait at
-- most 100 ms for both tables (as in migration 0023), so adds and promotions
-- queue behind the migration for no longer than that at a time.
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
    DROP CONSTRAINT knowledge_revisions_revision_check,
    DROP CONSTRAINT knowledge_revisions_digest_check,
    DROP CONSTRAINT knowledge_revisions_title_check,
    DROP CONSTRAINT knowledge_revisions_provenance_uri_check,
    DROP CONSTRAINT knowledge_revisions_content_bytes_check;

ALTER TABLE knowledge_sources
    DROP CONSTRAINT knowledge_sources_key_check;
