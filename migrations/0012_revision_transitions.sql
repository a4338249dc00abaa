-- A revision's state moves only along the edges of its state machine
-- (`StoredRevisionState::can_become` in shared/core/src/store/types.rs; a test
-- tries every pair of states against both). Every store function that changes
-- a state is guarded by its own WHERE clause; this trigger makes a guard that
-- is missing or wrong fail loudly instead of corrupting a revision.
CREATE FUNCTION knowledge_revision_transition() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF (OLD.state, NEW.state) NOT IN (
        ('pending'::revision_state, 'processing'::revision_state),
        ('pending', 'failed'),
        ('processing', 'active'),
        ('processing', 'failed'),
        ('active', 'replaced')
    ) THEN
        RAISE EXCEPTION 'a revision cannot go from % to %', OLD.state, NEW.state
            USING ERRCODE = 'check_violation', CONSTRAINT = 'knowledge_revisions_transition';
    END IF;
    RETURN NEW;
END;
$$;

-- Only a change of state fires it: leases, renewals and re-sends cost nothing.
CREATE TRIGGER knowledge_revisions_transition
    BEFORE UPDATE OF state ON knowledge_revisions
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION knowledge_revision_transition();
