-- 0016: what the model gateway metered (internal/gateway), per UTC day,
-- group and model (SQLite's 0016): the group/day and daily budgets count
-- from here, so a restart does not reset them and the replicas sharing the
-- database share them. Calls to a model without a price count their tokens
-- in unpriced_calls' rows, their cost unknown (not in cost_usd).

CREATE TABLE model_spend (
    day                text NOT NULL,          -- UTC date, 2026-11-27
    group_folder       text NOT NULL,
    model              text NOT NULL,          -- as the model API named it ('' when it did not)
    calls              bigint NOT NULL DEFAULT 0,
    unpriced_calls     bigint NOT NULL DEFAULT 0,
    input_tokens       bigint NOT NULL DEFAULT 0, -- cache writes and reads included
    output_tokens      bigint NOT NULL DEFAULT 0,
    cache_write_tokens bigint NOT NULL DEFAULT 0,
    cache_read_tokens  bigint NOT NULL DEFAULT 0,
    cost_usd           double precision NOT NULL DEFAULT 0,
    PRIMARY KEY (day, group_folder, model)
);
