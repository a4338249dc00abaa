-- Migration 0031 added the CHECKs of the knowledge tables' bounds NOT VALID
-- (enforced on every write, without reading the tables under their exclusive
-- lock). Validating them reads every source and revision once while reads and
-- writes go on (SHARE UPDATE EXCLUSIVE). Every row already there was written
-- through the contract's input types, which refuse what the CHECKs refuse.
ALTER TABLE knowledge_sources VALIDATE CONSTRAINT knowledge_sources_key_check;
ALTER TABLE knowledge_revisions VALIDATE CONSTRAINT knowledge_revisions_revision_check;
ALTER TABLE knowledge_revisions VALIDATE CONSTRAINT knowledge_revisions_digest_check;
ALTER TABLE knowledge_revisions VALIDATE CONSTRAINT knowledge_revisions_title_check;
ALTER TABLE knowledge_revisions VALIDATE CONSTRAINT knowledge_revisions_provenance_uri_check;
ALTER TABLE knowledge_revisions VALIDATE CONSTRAINT knowledge_revisions_content_bytes_check;
