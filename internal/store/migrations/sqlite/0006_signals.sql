-- 0006: a cancel asked of a run is recorded on the run, for whichever
-- process drives it (PostgreSQL's 0006, which also adds the LISTEN/NOTIFY
-- triggers; SQLite has no notifications: processes sharing a file re-read).

ALTER TABLE runs ADD COLUMN cancel_requested_by TEXT NOT NULL DEFAULT '';
