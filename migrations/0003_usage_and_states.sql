-- Usage counters, enum state columns, and slugs compared byte by byte.

-- Statuses, roles and languages are closed sets: enums, not free text.
CREATE TYPE workspace_status AS ENUM ('active', 'archived');
CREATE TYPE member_role AS ENUM ('member', 'admin', 'owner');
CREATE TYPE agent_language AS ENUM ('en', 'es');

ALTER TABLE workspaces DROP CONSTRAINT workspaces_status_check;
ALTER TABLE workspaces ALTER COLUMN status DROP DEFAULT;
ALTER TABLE workspaces ALTER COLUMN status TYPE workspace_status USING status::workspace_status;
ALTER TABLE workspaces ALTER COLUMN status SET DEFAULT 'active';

ALTER TABLE memberships DROP CONSTRAINT memberships_role_check;
ALTER TABLE memberships ALTER COLUMN role TYPE member_role USING role::member_role;

ALTER TABLE agents DROP CONSTRAINT agents_default_language_check;
ALTER TABLE agents ALTER COLUMN default_language TYPE agent_language USING default_language::agent_language;

-- Slugs are ASCII ([a-z0-9-]). The "C" collation orders them by bytes, so the
-- lookup of derived-slug candidates (a prefix range) can use the unique index
-- whatever the database's default collation.
ALTER TABLE workspaces ALTER COLUMN slug TYPE text COLLATE "C";
ALTER TABLE agents ALTER COLUMN slug TYPE text COLLATE "C";

-- What a Workspace uses of its limits, kept up to date by the writes that
-- change it (in the same transaction), so a limit check reads one row instead
-- of counting rows. Limit-consuming writers serialize on this row.
CREATE TABLE workspace_usage (
    workspace_id      uuid PRIMARY KEY REFERENCES workspaces (id),
    agents            bigint NOT NULL DEFAULT 0 CHECK (agents >= 0),
    api_keys          bigint NOT NULL DEFAULT 0 CHECK (api_keys >= 0),
    knowledge_sources bigint NOT NULL DEFAULT 0 CHECK (knowledge_sources >= 0),
    knowledge_bytes   bigint NOT NULL DEFAULT 0 CHECK (knowledge_bytes >= 0),
    -- Conversations of the current calendar month (UTC), which starts at
    -- `conversations_month`; a write in a later month starts again at zero.
    conversations     bigint NOT NULL DEFAULT 0 CHECK (conversations >= 0),
    conversations_month date NOT NULL DEFAULT date_trunc('month', now() AT TIME ZONE 'UTC')::date
);

INSERT INTO workspace_usage (workspace_id, agents, api_keys)
SELECT w.id,
       (SELECT count(*) FROM agents a WHERE a.workspace_id = w.id AND a.deleted_at IS NULL),
       (SELECT count(*) FROM api_keys k WHERE k.workspace_id = w.id AND k.revoked_at IS NULL)
FROM workspaces w;
