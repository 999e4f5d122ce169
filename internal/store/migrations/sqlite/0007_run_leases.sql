-- 0007: who drives each run when several host replicas share the database
-- (PostgreSQL's 0007). A SQLite database has one host, which drives every
-- run: it keeps no leases, but the schema is the same version on both.

CREATE TABLE run_leases (
    run_id     TEXT PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
    owner      TEXT NOT NULL,             -- replica.id of the replica driving the run
    expires_at TEXT NOT NULL              -- renewed by the owner every lease_ttl/3
);
CREATE INDEX run_leases_owner ON run_leases(owner);
