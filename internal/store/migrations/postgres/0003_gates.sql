-- 0003: human gates (wait.human questions) with their answers (SQLite's 0003).

CREATE TABLE gates (
    run_id      text NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    gate_id     text NOT NULL,                      -- engine Question.ID ("<node>-<visit>")
    node_id     text NOT NULL,
    question    text NOT NULL,
    choices     text NOT NULL DEFAULT '[]',         -- JSON array of engine.Option
    -- Random per asking; buttons carry it so a click on a stale message
    -- (an older asking of the same gate) cannot answer this one.
    nonce       text NOT NULL,
    message_ts  text NOT NULL DEFAULT '',           -- the chat message that asked
    asked_at    timestamptz NOT NULL,
    status      text NOT NULL DEFAULT 'open'
                CHECK (status IN ('open', 'answered', 'timeout', 'cancelled')),
    answer      text NOT NULL DEFAULT '',
    answered_by text NOT NULL DEFAULT '',
    answered_at timestamptz,
    PRIMARY KEY (run_id, gate_id)
);
CREATE INDEX gates_open ON gates(asked_at) WHERE status = 'open';
CREATE INDEX gates_message ON gates(message_ts) WHERE message_ts <> '';
