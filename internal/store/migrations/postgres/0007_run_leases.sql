-- 0007: who drives each run when several host replicas share the database
-- (SQLite's 0007). The replica that starts or takes over a run holds its
-- lease and renews it every lease_ttl/3; a lease past expires_at may be
-- taken over by any replica, which resumes the run from its journal.

CREATE TABLE run_leases (
    run_id     text PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
    owner      text NOT NULL,             -- replica.id of the replica driving the run
    expires_at timestamptz NOT NULL       -- the database's clock: replicas' clocks may differ
);
CREATE INDEX run_leases_owner ON run_leases(owner);
