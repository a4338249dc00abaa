-- An add commits in its own statement, outside a transaction, when the call is
-- the common case (no idempotency key, the Workspace as the call path read
-- it, room on a usage shard): no BEGIN and no COMMIT, two round trips fewer.
-- Its statement counts the source on a shard after inserting it (the order
-- every write takes rows in); if it found no shard to count it on, it must
-- write nothing, and there is no transaction to roll back: this function
-- fails the statement instead, and the add runs again in a transaction
-- (`store::knowledge::add_source`).
CREATE FUNCTION knowledge_add_uncounted() RETURNS boolean
    LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    RAISE EXCEPTION 'an add outside a transaction found no room to count it on'
        USING ERRCODE = 'SVC01';
END
$$;
