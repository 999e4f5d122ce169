-- 0010: runs' engine journals in the database (PostgreSQL's 0010). A SQLite
-- database has one host, which keeps each run's journal in its run
-- directory (events.jsonl, checkpoint.json): the table stays empty, but
-- the schema is the same version on both.

CREATE TABLE run_journal (
    run_id   TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    n        INTEGER NOT NULL,
    snapshot INTEGER NOT NULL DEFAULT 0,
    record   TEXT NOT NULL,
    PRIMARY KEY (run_id, n)
);
