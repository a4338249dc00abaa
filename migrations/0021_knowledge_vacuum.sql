-- Dead rows where reads walk them are kept in check (knowledge::statistics,
-- "vacuum"): every revision a worker promotes leaves dead versions behind in
-- the work queue's indexes (knowledge_revisions_queue, _running), every merge
-- of the index dead postings, and each claim and each question walks them
-- until a vacuum removes them. A worker vacuums a knowledge table once a
-- thousand of its rows died, at most once per interval between all replicas;
-- this column records when one last did.
ALTER TABLE knowledge_statistics ADD COLUMN vacuumed_at timestamptz NOT NULL DEFAULT '-infinity';

-- Where autovacuum runs, it vacuums the queue after a thousand dead rows,
-- whatever the table's size (instead of 5% of it, migration 0016).
ALTER TABLE knowledge_revisions SET (autovacuum_vacuum_threshold = 1000, autovacuum_vacuum_scale_factor = 0);
