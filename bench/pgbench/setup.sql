-- The Workspace and Agent bench/pgbench/add.sql adds sources to.
INSERT INTO workspaces (id, name, slug, plan)
VALUES ('00000000-0000-0000-0000-0000000000a1', 'pgbench', 'pgbench', 'pro');
INSERT INTO agents (id, workspace_id, name, slug, temperature, default_language, instructions)
VALUES ('00000000-0000-0000-0000-0000000000b1', '00000000-0000-0000-0000-0000000000a1', 'pgbench', 'pgbench', 0.2,
        'en', 'Answer from the sources.');
