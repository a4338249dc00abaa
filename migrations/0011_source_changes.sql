-- Every API process keeps knowledge_source.wait's answers for sources still
-- being processed (svc_core::knowledge::waits) and drops one when PostgreSQL
-- says its source changed: this trigger notifies `knowledge_source_changed`
-- with the source's id, delivered to listeners when the change commits (never
-- when it rolls back).
--
-- Only answers whose candidate is pending or processing are kept, and a kept
-- answer can only come from a row in that state; any change of such a row is
-- told, so a row that is already past it (active, failed, deleted) changes
-- without a notification. Notifying commits queue one after another in
-- PostgreSQL: most writes (adds, changes of active sources, reconcile's
-- no-ops) stay out of that queue.

CREATE FUNCTION knowledge_source_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('knowledge_source_changed', OLD.id::text);
    RETURN NULL;
END
$$;

CREATE TRIGGER knowledge_source_changed
    AFTER UPDATE OR DELETE ON knowledge_sources
    FOR EACH ROW
    WHEN (OLD.candidate_state IN ('pending', 'processing'))
    EXECUTE FUNCTION knowledge_source_changed();
