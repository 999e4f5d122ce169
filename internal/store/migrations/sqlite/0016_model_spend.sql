-- 0016: what the model gateway metered (internal/gateway), per UTC day,
-- group and model (PostgreSQL's 0016): the group/day and daily budgets
-- count from here, so a restart does not reset them and replicas sharing a
-- database share them. Calls to a model without a price count their
-- tokens in unpriced_calls' rows, their cost unknown (not in cost_usd).

CREATE TABLE model_spend (
    day                TEXT NOT NULL,          -- UTC date, 2026-11-27
    group_folder       TEXT NOT NULL,
    model              TEXT NOT NULL,          -- as the model API named it ('' when it did not)
    calls              INTEGER NOT NULL DEFAULT 0,
    unpriced_calls     INTEGER NOT NULL DEFAULT 0,
    input_tokens       INTEGER NOT NULL DEFAULT 0, -- cache writes and reads included
    output_tokens      INTEGER NOT NULL DEFAULT 0,
    cache_write_tokens INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens  INTEGER NOT NULL DEFAULT 0,
    cost_usd           REAL NOT NULL DEFAULT 0,
    PRIMARY KEY (day, group_folder, model)
);
