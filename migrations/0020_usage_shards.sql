-- Escrowed shards of a Workspace's knowledge usage (issue 23 §2a): adds of one
-- Workspace no longer queue on its one `workspace_usage` row.
--
-- A shard holds knowledge usage counted since the last rebalance (`sources`,
-- `bytes`) and room escrowed to it (`sources_room`, `bytes_room`): a slice of
-- what the limits leave, granted under the limits in `room_limits`. An add
-- moves room to usage on one shard it can lock without waiting; when none has
-- room, a rebalance (under the `workspace_usage` row's lock) folds the shards'
-- usage into that row and shares out again what the limits leave. Exact: the
-- row's usage, the shards' usage and their room never sum past a limit.
--
-- The row's knowledge counters are now a base that frees lower (a delete, a
-- replaced revision): only the sum with the shards is the usage, so the base
-- alone may be negative.
CREATE TABLE workspace_usage_shards (
    workspace_id uuid NOT NULL REFERENCES workspaces (id),
    shard        smallint NOT NULL CHECK (shard >= 0 AND shard < 16),
    sources      bigint NOT NULL DEFAULT 0,
    bytes        bigint NOT NULL DEFAULT 0,
    sources_room bigint NOT NULL DEFAULT 0 CHECK (sources_room >= 0),
    bytes_room   bigint NOT NULL DEFAULT 0 CHECK (bytes_room >= 0),
    -- The `knowledge_sources` and `knowledge_bytes` limits the room was
    -- granted under: room is used only under the same limits.
    room_limits  bigint[] NOT NULL DEFAULT '{0,0}',
    PRIMARY KEY (workspace_id, shard)
);

INSERT INTO workspace_usage_shards (workspace_id, shard)
SELECT workspace_id, shard FROM workspace_usage, generate_series(0, 15) AS shard;

ALTER TABLE workspace_usage DROP CONSTRAINT workspace_usage_knowledge_sources_check;
ALTER TABLE workspace_usage DROP CONSTRAINT workspace_usage_knowledge_bytes_check;
