-- 0014: one table of leases for every kind (SQLite's 0014): a run's
-- driver, a group's chat conversation, a run thread's one deliverer, and
-- any kind to come — one row (kind, key, owner, expiry), taken, renewed
-- and released by the same statements (internal/lease). The run and group
-- leases move in as they are; the delivery claims that were columns of
-- runs, on each replica's own clock, move in and go on the database's.

CREATE TABLE leases (
    kind       text NOT NULL,              -- run, group, delivery, …
    key        text NOT NULL,              -- which one: a run id, a group folder
    owner      text NOT NULL,              -- the replica holding it (replica.id)
    expires_at timestamptz NOT NULL,       -- the database's clock: replicas' clocks may differ
    PRIMARY KEY (kind, key)
);
CREATE INDEX leases_owner ON leases(owner);

INSERT INTO leases (kind, key, owner, expires_at)
    SELECT 'run', run_id, owner, expires_at FROM run_leases;
INSERT INTO leases (kind, key, owner, expires_at)
    SELECT 'group', group_folder, owner, expires_at FROM group_leases;
INSERT INTO leases (kind, key, owner, expires_at)
    SELECT 'delivery', id, delivery_by, delivery_until
    FROM runs WHERE delivery_by <> '' AND delivery_until IS NOT NULL;

DROP TABLE run_leases;
DROP TABLE group_leases;
ALTER TABLE runs DROP COLUMN delivery_by, DROP COLUMN delivery_until;
