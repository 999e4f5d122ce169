-- 0002: pipeline runs and their append-only event log (SQLite's 0002).

CREATE TABLE runs (
    id                 text PRIMARY KEY,
    -- No foreign keys to groups/chats: run history outlives a group's registration.
    group_folder       text NOT NULL,
    chat_id            text NOT NULL,
    thread_ts          text NOT NULL DEFAULT '',   -- root message ts of the run's thread
    verbosity          text NOT NULL DEFAULT 'standard'
                       CHECK (verbosity IN ('minimal', 'standard', 'verbose')),
    source_dot         text NOT NULL,
    file_name          text NOT NULL DEFAULT '',
    goal               text NOT NULL DEFAULT '',
    status             text NOT NULL DEFAULT 'queued'
                       CHECK (status IN ('queued', 'running', 'waiting', 'success', 'fail', 'cancelled', 'interrupted')),
    failure_reason     text NOT NULL DEFAULT '',
    created_at         timestamptz NOT NULL,       -- queued
    started_at         timestamptz,                -- first time it ran
    finished_at        timestamptz,                -- success, fail or cancelled
    logs_root          text NOT NULL DEFAULT '',
    cost_usd           double precision NOT NULL DEFAULT 0,
    input_tokens       bigint NOT NULL DEFAULT 0,
    output_tokens      bigint NOT NULL DEFAULT 0,
    started_by         text NOT NULL DEFAULT '',
    -- Highest event seq stored, and highest delivered to the run's chat: the
    -- delivery outbox is "events with seq > last_delivered_seq".
    last_seq           bigint NOT NULL DEFAULT 0,
    last_delivered_seq bigint NOT NULL DEFAULT 0 CHECK (last_delivered_seq <= last_seq)
);
-- Listing is newest first with keyset pagination on (created_at, id).
CREATE INDEX runs_created ON runs(created_at, id);
CREATE INDEX runs_status ON runs(status, created_at, id);
CREATE INDEX runs_group ON runs(group_folder, created_at, id);
CREATE INDEX runs_chat ON runs(chat_id, created_at, id);
CREATE INDEX runs_thread ON runs(chat_id, thread_ts) WHERE thread_ts <> '';
CREATE INDEX runs_undelivered ON runs(id) WHERE last_seq > last_delivered_seq;

CREATE TABLE run_events (
    run_id  text NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    seq     bigint NOT NULL CHECK (seq > 0),
    type    text NOT NULL,
    node_id text NOT NULL DEFAULT '',
    time    timestamptz NOT NULL,
    payload text NOT NULL,                          -- the whole engine.Event as JSON
    PRIMARY KEY (run_id, seq)
);

-- Events are history: a stored event never changes.
CREATE FUNCTION run_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'run_events is append-only';
END $$;
CREATE TRIGGER run_events_append_only BEFORE UPDATE ON run_events
    FOR EACH ROW EXECUTE FUNCTION run_events_append_only();

-- Keep runs.last_seq current in the statement that inserts, so a single
-- event is one autocommit INSERT. Ignored duplicates fire no trigger.
CREATE FUNCTION run_events_advance_last_seq() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE runs SET last_seq = NEW.seq WHERE id = NEW.run_id AND last_seq < NEW.seq;
    RETURN NULL;
END $$;
CREATE TRIGGER run_events_advance_last_seq AFTER INSERT ON run_events
    FOR EACH ROW EXECUTE FUNCTION run_events_advance_last_seq();
