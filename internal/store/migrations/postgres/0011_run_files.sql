-- 0011: the stage files people read (prompt.md, response.md, status.json),
-- kept in the database replicas share (SQLite's 0011), so that every
-- replica's dashboard shows every stage, wherever it ran.

CREATE TABLE run_files (
    run_id  text NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    path    text NOT NULL,           -- relative to the run's logs root, e.g. plan/response.md
    content bytea NOT NULL,
    PRIMARY KEY (run_id, path)
);
