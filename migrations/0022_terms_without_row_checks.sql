-- A promotion writes one knowledge_terms row per distinct word of the
-- revision (about forty for a 400-byte source), and each row's foreign key
-- to knowledge_revisions ran its own check: a fifth of the index statement's
-- time. The reference is checked once instead, by the knowledge_documents row
-- the same statement writes for the same revision (migration 0017), and
-- revisions are never deleted, so no term can point at a revision that does
-- not exist. The index on revision_id stays: merges delete by it.
--
-- Dropping the key locks both tables exclusively for a moment: rather than
-- queue every claim, add and answer behind a long transaction while it waits,
-- the migration gives up after 5 s (run it again).
SET LOCAL lock_timeout = '5s';
ALTER TABLE knowledge_terms DROP CONSTRAINT knowledge_terms_revision_id_fkey;
