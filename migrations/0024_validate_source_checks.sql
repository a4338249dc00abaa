-- Migration 0023 added the two CHECKs of what a live source shows NOT VALID
-- (enforced on every write from then on, without reading the table under its
-- exclusive lock). Validating them reads every source once while reads and
-- writes go on (SHARE UPDATE EXCLUSIVE); they say what the CHECKs they
-- replaced said, so no row fails.
ALTER TABLE knowledge_sources VALIDATE CONSTRAINT knowledge_sources_active_shown_check;
ALTER TABLE knowledge_sources VALIDATE CONSTRAINT knowledge_sources_candidate_shown_check;
