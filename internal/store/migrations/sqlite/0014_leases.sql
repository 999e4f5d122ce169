-- 0014: one table of leases for every kind (PostgreSQL's 0014): a run's
-- driver, a group's chat conversation, a run thread's one deliverer, and
-- any kind to come — one row (kind, key, owner, expiry), taken, renewed
-- and released by the same statements (internal/lease). Expiry is on the
-- database's clock, here milliseconds since 1970. Run and group leases
-- were never stored on SQLite (one host holds them all); the delivery
-- claims that were columns of runs, on each process's own clock, move in.

CREATE TABLE leases (
    kind       TEXT NOT NULL,              -- run, group, delivery, …
    key        TEXT NOT NULL,              -- which one: a run id, a group folder
    owner      TEXT NOT NULL,              -- the process holding it (replica.id)
    expires_at INTEGER NOT NULL,           -- ms since 1970: renewed by the owner every lease_ttl/3
    PRIMARY KEY (kind, key)
);
CREATE INDEX leases_owner ON leases(owner);

INSERT INTO leases (kind, key, owner, expires_at)
    SELECT 'delivery', id, delivery_by, CAST((julianday(delivery_until) - 2440587.5) * 86400000 AS INTEGER)
    FROM runs WHERE delivery_by <> '' AND delivery_until IS NOT NULL;

DROP TABLE run_leases;
DROP TABLE group_leases;
ALTER TABLE runs DROP COLUMN delivery_by;
ALTER TABLE runs DROP COLUMN delivery_until;
