-- The add statement (store::knowledge::add_source) with its transaction, for
-- pgbench: what an add costs PostgreSQL alone, before and after a schema
-- change. In a database migrated by `svc-api migrate`:
--
--   psql -d DB -f bench/pgbench/setup.sql
--   PGOPTIONS='-c synchronous_commit=off' \
--     pgbench -n -M prepared -c 4 -j 1 -T 8 -f bench/pgbench/add.sql DB
--
-- Asynchronous commit keeps the disk out of the figure. Alternate runs of
-- the two databases compared: each run adds rows to the one it measures.
\set k random(1, 1000000000)
BEGIN;
WITH agent AS (
    SELECT 1 FROM agents
    WHERE id = '00000000-0000-0000-0000-0000000000b1' AND workspace_id = '00000000-0000-0000-0000-0000000000a1'
      AND deleted_at IS NULL
    FOR SHARE
), ids AS (
    SELECT gen_random_uuid() AS s, gen_random_uuid() AS r
), source AS (
    INSERT INTO knowledge_sources (id, workspace_id, agent_id, key, latest_revision_id,
                                   candidate_revision_id, revision, digest, title, provenance_kind,
                                   provenance_uri, required, imported_at, candidate_revision,
                                   candidate_digest, candidate_state, candidate_imported_at,
                                   candidate_bytes)
    SELECT ids.s, '00000000-0000-0000-0000-0000000000a1', '00000000-0000-0000-0000-0000000000b1',
           'k' || :k || '-' || ids.s, ids.r, ids.r, 'v1', 'sha256:' || repeat('0', 64), 'Title', 'repository',
           'docs/x', true, now(), 'v1', 'sha256:' || repeat('0', 64), 'pending', now(), 400
    FROM agent, ids
    ON CONFLICT (agent_id, key) WHERE deleted_at IS NULL DO NOTHING
    RETURNING id, latest_revision_id
), revision AS (
    INSERT INTO knowledge_revisions (id, source_id, workspace_id, agent_id, revision, digest, title,
                                     provenance_kind, provenance_uri, required, content, content_bytes)
    SELECT latest_revision_id, id, '00000000-0000-0000-0000-0000000000a1', '00000000-0000-0000-0000-0000000000b1',
           'v1', 'sha256:' || repeat('0', 64), 'Title', 'repository', 'docs/x', true, repeat('word ', 80), 400
    FROM source
    RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM agent), EXISTS (SELECT 1 FROM revision), now();
COMMIT;
