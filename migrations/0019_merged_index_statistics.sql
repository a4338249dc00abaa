-- The merged index's tables (0017) get the knowledge tables' autovacuum
-- settings (0016): analyzed after 2% of their rows changed, vacuumed after 5%.
-- Merges delete and rewrite rows, so vacuum matters here as much as analyze.
ALTER TABLE knowledge_documents SET (autovacuum_analyze_scale_factor = 0.02, autovacuum_vacuum_scale_factor = 0.05);
ALTER TABLE knowledge_segments SET (autovacuum_analyze_scale_factor = 0.02, autovacuum_vacuum_scale_factor = 0.05);
ALTER TABLE knowledge_segment_terms SET (autovacuum_analyze_scale_factor = 0.02, autovacuum_vacuum_scale_factor = 0.05);
ALTER TABLE knowledge_masks SET (autovacuum_analyze_scale_factor = 0.02, autovacuum_vacuum_scale_factor = 0.05);
