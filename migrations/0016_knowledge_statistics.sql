-- Table statistics of the knowledge tables are the service's own business
-- (knowledge::statistics): a worker analyzes the tables that changed a lot, at
-- most once a minute between all replicas. This row records when one last
-- did; a replica claims the next run by moving it forward.
CREATE TABLE knowledge_statistics (
    id          boolean PRIMARY KEY DEFAULT true CHECK (id),
    analyzed_at timestamptz NOT NULL DEFAULT '-infinity'
);
INSERT INTO knowledge_statistics DEFAULT VALUES;

-- Where autovacuum runs, it analyzes these tables after 2% of their rows
-- changed (instead of 10%), and vacuums them after 5% (instead of 20%): they
-- grow in bulk imports and churn as revisions replace each other.
ALTER TABLE knowledge_sources SET (autovacuum_analyze_scale_factor = 0.02, autovacuum_vacuum_scale_factor = 0.05);
ALTER TABLE knowledge_revisions SET (autovacuum_analyze_scale_factor = 0.02, autovacuum_vacuum_scale_factor = 0.05);
ALTER TABLE knowledge_passages SET (autovacuum_analyze_scale_factor = 0.02, autovacuum_vacuum_scale_factor = 0.05);
ALTER TABLE knowledge_terms SET (autovacuum_analyze_scale_factor = 0.02, autovacuum_vacuum_scale_factor = 0.05);
