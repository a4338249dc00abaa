-- Work that one process at a time does across all replicas (the sweeper)
-- holds a lease in a row: taken when free or run out, renewed while the work
-- runs, given up when it ends. A process cut off from PostgreSQL stops
-- renewing, and another takes the lease over once it runs out, whatever
-- became of the first one's sessions.
CREATE TABLE singleton_leases (
    name        text PRIMARY KEY,
    holder      text NOT NULL,
    expires_at  timestamptz NOT NULL
);
