-- 0010: runs' engine journals in the database (SQLite's 0010), so that any
-- replica sharing it can resume any run: each record (an event, maybe
-- committing a step, or a snapshot of the run's whole state) is a row; a
-- snapshot replaces the rows before it.

CREATE TABLE run_journal (
    run_id   text NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    n        bigint NOT NULL,                 -- the record's place in the journal
    snapshot boolean NOT NULL DEFAULT false,
    record   text NOT NULL,                   -- JSON: {"event", "commit"} or {"snapshot"}
    PRIMARY KEY (run_id, n)
);
