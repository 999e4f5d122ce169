-- 0005: one state vocabulary for runs and gates (internal/runs), and gates
-- that remember their whole question and the chosen option.
--
--   runs.status   success → succeeded, fail → failed
--   gates.status  timeout → timed_out, cancelled → withdrawn
--   gates         + question_type, approvers, timeout_s, option_index
--
-- SQLite cannot change a CHECK constraint in place, so the three tables are
-- rebuilt: new tables (the children referencing the new parent), the rows
-- copied with the new words, the old tables dropped children first (so no
-- ON DELETE CASCADE fires), then the new ones renamed (which rewrites the
-- children's references to the final name). One transaction: all or nothing.

CREATE TABLE runs_v5 (
    id                 TEXT PRIMARY KEY,
    group_folder       TEXT NOT NULL,
    chat_id            TEXT NOT NULL,
    thread_ts          TEXT NOT NULL DEFAULT '',
    verbosity          TEXT NOT NULL DEFAULT 'standard'
                       CHECK (verbosity IN ('minimal', 'standard', 'verbose')),
    source_dot         TEXT NOT NULL,
    file_name          TEXT NOT NULL DEFAULT '',
    goal               TEXT NOT NULL DEFAULT '',
    status             TEXT NOT NULL DEFAULT 'queued'
                       CHECK (status IN ('queued', 'running', 'waiting', 'interrupted', 'succeeded', 'failed', 'cancelled')),
    failure_reason     TEXT NOT NULL DEFAULT '',
    created_at         TEXT NOT NULL,
    started_at         TEXT,
    finished_at        TEXT,
    logs_root          TEXT NOT NULL DEFAULT '',
    cost_usd           REAL NOT NULL DEFAULT 0,
    input_tokens       INTEGER NOT NULL DEFAULT 0,
    output_tokens      INTEGER NOT NULL DEFAULT 0,
    started_by         TEXT NOT NULL DEFAULT '',
    last_seq           INTEGER NOT NULL DEFAULT 0,
    last_delivered_seq INTEGER NOT NULL DEFAULT 0 CHECK (last_delivered_seq <= last_seq)
);
INSERT INTO runs_v5 SELECT id, group_folder, chat_id, thread_ts, verbosity, source_dot, file_name, goal,
    CASE status WHEN 'success' THEN 'succeeded' WHEN 'fail' THEN 'failed' ELSE status END,
    failure_reason, created_at, started_at, finished_at, logs_root, cost_usd, input_tokens, output_tokens,
    started_by, last_seq, last_delivered_seq
FROM runs;

CREATE TABLE run_events_v5 (
    run_id  TEXT NOT NULL REFERENCES runs_v5(id) ON DELETE CASCADE,
    seq     INTEGER NOT NULL CHECK (seq > 0),
    type    TEXT NOT NULL,
    node_id TEXT NOT NULL DEFAULT '',
    time    TEXT NOT NULL,
    payload TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
INSERT INTO run_events_v5 SELECT run_id, seq, type, node_id, time, payload FROM run_events;

CREATE TABLE gates_v5 (
    run_id        TEXT NOT NULL REFERENCES runs_v5(id) ON DELETE CASCADE,
    gate_id       TEXT NOT NULL,                      -- engine Question.ID ("<node>-<visit>")
    node_id       TEXT NOT NULL,
    question      TEXT NOT NULL,                      -- the question's text
    choices       TEXT NOT NULL DEFAULT '[]',         -- JSON array of engine.Option
    question_type TEXT NOT NULL DEFAULT '',
    approvers     TEXT NOT NULL DEFAULT '',           -- the node's approvers attribute
    timeout_s     REAL NOT NULL DEFAULT 0,
    -- Random per posting; buttons carry it so a click on a stale message
    -- (an older posting of the same gate) cannot answer this one.
    nonce         TEXT NOT NULL,
    message_ts    TEXT NOT NULL DEFAULT '',           -- the chat message that asked
    asked_at      TEXT NOT NULL,
    status        TEXT NOT NULL DEFAULT 'open'
                  CHECK (status IN ('open', 'answered', 'timed_out', 'withdrawn')),
    option_index  INTEGER NOT NULL DEFAULT 0,         -- 1-based chosen option, 0 for none
    answer        TEXT NOT NULL DEFAULT '',           -- the option's value, or free text
    answered_by   TEXT NOT NULL DEFAULT '',
    answered_at   TEXT,
    PRIMARY KEY (run_id, gate_id)
) WITHOUT ROWID;
INSERT INTO gates_v5 (run_id, gate_id, node_id, question, choices, nonce, message_ts, asked_at, status,
    answer, answered_by, answered_at)
SELECT run_id, gate_id, node_id, question, choices, nonce, message_ts, asked_at,
    CASE status WHEN 'timeout' THEN 'timed_out' WHEN 'cancelled' THEN 'withdrawn' ELSE status END,
    answer, answered_by, answered_at
FROM gates;

DROP TABLE gates;
DROP TABLE run_events;
DROP TABLE runs;
ALTER TABLE runs_v5 RENAME TO runs;
ALTER TABLE run_events_v5 RENAME TO run_events;
ALTER TABLE gates_v5 RENAME TO gates;

CREATE INDEX runs_created ON runs(created_at, id);
CREATE INDEX runs_status ON runs(status, created_at, id);
CREATE INDEX runs_group ON runs(group_folder, created_at, id);
CREATE INDEX runs_chat ON runs(chat_id, created_at, id);
CREATE INDEX runs_thread ON runs(chat_id, thread_ts) WHERE thread_ts <> '';
CREATE INDEX runs_undelivered ON runs(id) WHERE last_seq > last_delivered_seq;

CREATE TRIGGER run_events_append_only BEFORE UPDATE ON run_events
BEGIN
    SELECT RAISE(ABORT, 'run_events is append-only');
END;
CREATE TRIGGER run_events_advance_last_seq AFTER INSERT ON run_events
BEGIN
    UPDATE runs SET last_seq = NEW.seq WHERE id = NEW.run_id AND last_seq < NEW.seq;
END;

CREATE INDEX gates_open ON gates(asked_at) WHERE status = 'open';
CREATE INDEX gates_message ON gates(message_ts) WHERE message_ts <> '';
