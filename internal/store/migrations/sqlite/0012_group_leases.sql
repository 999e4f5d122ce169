-- 0012: which replica holds each group's chat conversation when several host
-- replicas share the database (PostgreSQL's 0012). A SQLite database has one
-- host, which holds every group's conversation: it keeps no leases, but the
-- schema is the same version on both.

CREATE TABLE group_leases (
    group_folder TEXT PRIMARY KEY REFERENCES groups(folder) ON DELETE CASCADE,
    owner        TEXT NOT NULL,             -- replica.id of the replica running the conversation
    expires_at   TEXT NOT NULL              -- renewed by the owner every lease_ttl/3
);
CREATE INDEX group_leases_owner ON group_leases(owner);
