-- 0003: human gates (wait.human questions) with their answers.

CREATE TABLE gates (
    run_id      TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    gate_id     TEXT NOT NULL,                      -- engine Question.ID ("<node>-<visit>")
    node_id     TEXT NOT NULL,
    question    TEXT NOT NULL,
    choices     TEXT NOT NULL DEFAULT '[]',         -- JSON array of engine.Option
    -- Random per asking; buttons carry it so a click on a stale message
    -- (an older asking of the same gate) cannot answer this one.
    nonce       TEXT NOT NULL,
    message_ts  TEXT NOT NULL DEFAULT '',           -- the chat message that asked
    asked_at    TEXT NOT NULL,
    status      TEXT NOT NULL DEFAULT 'open'
                CHECK (status IN ('open', 'answered', 'timeout', 'cancelled')),
    answer      TEXT NOT NULL DEFAULT '',
    answered_by TEXT NOT NULL DEFAULT '',
    answered_at TEXT,
    PRIMARY KEY (run_id, gate_id)
) WITHOUT ROWID;
CREATE INDEX gates_open ON gates(asked_at) WHERE status = 'open';
CREATE INDEX gates_message ON gates(message_ts) WHERE message_ts <> '';
