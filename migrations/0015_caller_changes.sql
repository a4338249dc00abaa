-- Every API process keeps the callers it authenticated a moment ago
-- (svc_core::auth::callers) and drops them all when PostgreSQL says something
-- a caller is made of changed: an API key (revoked, rotated, its scopes), a
-- User (sessions revoked, set up, renamed), a membership (added, role changed,
-- removed) or a Workspace (archived, renamed, its plan or limits). These
-- triggers notify `caller_changed` (payload: the table), delivered to
-- listeners when the change commits, never when it rolls back.
--
-- They are rare writes. The one frequent write to these tables, an API key's
-- `last_used_at` touched at most once a minute per key, notifies nothing.

CREATE FUNCTION caller_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('caller_changed', TG_TABLE_NAME);
    RETURN NULL;
END
$$;

CREATE TRIGGER caller_changed
    AFTER UPDATE ON api_keys
    FOR EACH ROW
    WHEN ((to_jsonb(OLD) - 'last_used_at') IS DISTINCT FROM (to_jsonb(NEW) - 'last_used_at'))
    EXECUTE FUNCTION caller_changed();

CREATE TRIGGER caller_removed
    AFTER DELETE ON api_keys
    FOR EACH ROW
    EXECUTE FUNCTION caller_changed();

CREATE TRIGGER caller_changed
    AFTER UPDATE ON users
    FOR EACH ROW
    WHEN (OLD.* IS DISTINCT FROM NEW.*)
    EXECUTE FUNCTION caller_changed();

CREATE TRIGGER caller_removed
    AFTER DELETE ON users
    FOR EACH ROW
    EXECUTE FUNCTION caller_changed();

-- A new membership changes which Workspaces a User's header selects.
CREATE TRIGGER caller_changed
    AFTER INSERT OR DELETE ON memberships
    FOR EACH ROW
    EXECUTE FUNCTION caller_changed();

CREATE TRIGGER caller_role_changed
    AFTER UPDATE ON memberships
    FOR EACH ROW
    WHEN (OLD.* IS DISTINCT FROM NEW.*)
    EXECUTE FUNCTION caller_changed();

CREATE TRIGGER caller_changed
    AFTER UPDATE ON workspaces
    FOR EACH ROW
    WHEN (OLD.* IS DISTINCT FROM NEW.*)
    EXECUTE FUNCTION caller_changed();

CREATE TRIGGER caller_removed
    AFTER DELETE ON workspaces
    FOR EACH ROW
    EXECUTE FUNCTION caller_changed();
