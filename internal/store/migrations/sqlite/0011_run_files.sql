-- 0011: stage files in the database (PostgreSQL's 0011). A SQLite
-- database has one host, whose dashboard reads them from the run's
-- directory: the table stays empty, but the schema is the same version.

CREATE TABLE run_files (
    run_id  TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    path    TEXT NOT NULL,
    content BLOB NOT NULL,
    PRIMARY KEY (run_id, path)
);
