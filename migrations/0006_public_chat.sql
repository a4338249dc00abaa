-- Public Chat and the Widget configuration of each Agent.
--
-- A row exists only once a call wrote one: an Agent without a `public_chats`
-- row has Public Chat disabled and no website, and one without a
-- `widget_configurations` row has the default configuration, computed from the
-- Agent by svc-core `chat`. Creating an Agent writes nothing here.
--
-- Every read joins the live Agent of the caller's Workspace (or, on the public
-- side, of any Workspace, reporting which); an Agent's rows are deleted with it.

CREATE TABLE public_chats (
    agent_id   uuid PRIMARY KEY REFERENCES agents (id),
    enabled    boolean NOT NULL,
    -- As the caller gave it (an absolute http/https URL, checked by the API).
    website    text CHECK (char_length(website) BETWEEN 1 AND 2000),
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE widget_configurations (
    agent_id      uuid PRIMARY KEY REFERENCES agents (id),
    -- The whole configuration as widget.inspect shows it (the camelCase JSON of
    -- svc-contract's `WidgetConfiguration`), allowed origins normalised. Stored
    -- in full, so a read is one row and a change of defaults in code never
    -- changes a configuration someone wrote.
    configuration jsonb NOT NULL CHECK (jsonb_typeof(configuration) = 'object'),
    updated_at    timestamptz NOT NULL DEFAULT now()
);
