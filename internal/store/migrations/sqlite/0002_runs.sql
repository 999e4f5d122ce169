-- 0002: pipeline runs and their append-only event log.

CREATE TABLE runs (
    id                 TEXT PRIMARY KEY,
    -- No foreign keys to groups/chats: run history outlives a group's registration.
    group_folder       TEXT NOT NULL,
    chat_id            TEXT NOT NULL,
    thread_ts          TEXT NOT NULL DEFAULT '',   -- root message ts of the run's thread
    verbosity          TEXT NOT NULL DEFAULT 'standard'
                       CHECK (verbosity IN ('minimal', 'standard', 'verbose')),
    source_dot         TEXT NOT NULL,
    file_name          TEXT NOT NULL DEFAULT '',
    goal               TEXT NOT NULL DEFAULT '',
    status             TEXT NOT NULL DEFAULT 'queued'
                       CHECK (status IN ('queued', 'running', 'waiting', 'success', 'fail', 'cancelled', 'interrupted')),
    failure_reason     TEXT NOT NULL DEFAULT '',
    created_at         TEXT NOT NULL,              -- queued
    started_at         TEXT,                       -- first time it ran
    finished_at        TEXT,                       -- success, fail or cancelled
    logs_root          TEXT NOT NULL DEFAULT '',
    cost_usd           REAL NOT NULL DEFAULT 0,
    input_tokens       INTEGER NOT NULL DEFAULT 0,
    output_tokens      INTEGER NOT NULL DEFAULT 0,
    started_by         TEXT NOT NULL DEFAULT '',
    -- Highest event seq stored, and highest delivered to the run's chat: the
    -- delivery outbox is "events with seq > last_delivered_seq".
    last_seq           INTEGER NOT NULL DEFAULT 0,
    last_delivered_seq INTEGER NOT NULL DEFAULT 0 CHECK (last_delivered_seq <= last_seq)
);
-- Listing is newest first with keyset pagination on (created_at, id).
CREATE INDEX runs_created ON runs(created_at, id);
CREATE INDEX runs_status ON runs(status, created_at, id);
CREATE INDEX runs_group ON runs(group_folder, created_at, id);
CREATE INDEX runs_chat ON runs(chat_id, created_at, id);
CREATE INDEX runs_thread ON runs(chat_id, thread_ts) WHERE thread_ts <> '';
CREATE INDEX runs_undelivered ON runs(id) WHERE last_seq > last_delivered_seq;

CREATE TABLE run_events (
    run_id  TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    seq     INTEGER NOT NULL CHECK (seq > 0),
    type    TEXT NOT NULL,
    node_id TEXT NOT NULL DEFAULT '',
    time    TEXT NOT NULL,
    payload TEXT NOT NULL,                          -- the whole engine.Event as JSON
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;

-- Events are history: a stored event never changes. (Inserts of an existing
-- seq are ignored by the store; this trigger catches anything else.)
CREATE TRIGGER run_events_append_only BEFORE UPDATE ON run_events
BEGIN
    SELECT RAISE(ABORT, 'run_events is append-only');
END;

-- Keep runs.last_seq current in the same statement as the insert, so a
-- single event is one autocommit INSERT (no BEGIN/COMMIT round trips).
-- Ignored duplicates fire no trigger.
CREATE TRIGGER run_events_advance_last_seq AFTER INSERT ON run_events
BEGIN
    UPDATE runs SET last_seq = NEW.seq WHERE id = NEW.run_id AND last_seq < NEW.seq;
END;
