-- The work queue stays clean (knowledge::statistics, "vacuum"): every
-- revision a worker promotes leaves dead versions behind in the queue's
-- indexes (knowledge_revisions_queue, knowledge_revisions_running), and each
-- claim walks them from the head of the queue until a vacuum removes them. A
-- worker vacuums the table once a thousand rows died, at most once per
-- interval between all replicas; this column records when one last did.
ALTER TABLE knowledge_statistics ADD COLUMN vacuumed_at timestamptz NOT NULL DEFAULT '-infinity';

-- Where autovacuum runs, it does the same after a thousand dead rows, whatever
-- the table's size (instead of 5% of it, migration 0016).
ALTER TABLE knowledge_revisions SET (autovacuum_vacuum_threshold = 1000, autovacuum_vacuum_scale_factor = 0);
