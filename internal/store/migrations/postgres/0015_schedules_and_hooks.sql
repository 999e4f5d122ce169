-- 0015 (SQLite's 0015): work that starts itself (docs/schedules.md). Scheduled tasks (a
-- prompt for a group's agent, or a pipeline with inputs, on a cron, interval
-- or once schedule), the history of their fires, the deliveries webhooks
-- received. Each fire and delivery is claimed by a lease (kinds fire and
-- hook of the one leases table, 0014), so that it starts one run or prompt
-- when several replicas share a PostgreSQL store.

CREATE TABLE schedules (
    id             text PRIMARY KEY,
    group_folder   TEXT NOT NULL,
    chat_id        TEXT NOT NULL,
    prompt         TEXT NOT NULL DEFAULT '',
    context_mode   TEXT NOT NULL DEFAULT 'isolated',
    pipeline       TEXT NOT NULL DEFAULT '',   -- a stored pipeline's name
    dot            TEXT NOT NULL DEFAULT '',   -- or a pipeline given inline
    inputs         TEXT NOT NULL DEFAULT '',   -- JSON object of strings
    schedule_type  TEXT NOT NULL,              -- cron | interval | once
    schedule_value TEXT NOT NULL,
    catch_up       TEXT NOT NULL DEFAULT 'once',
    status         TEXT NOT NULL DEFAULT 'active', -- active | paused | completed
    reason         TEXT NOT NULL DEFAULT '',   -- why the host paused it
    next_run       timestamptz,                       -- NULL: never again
    last_run       timestamptz,
    last_result    TEXT NOT NULL DEFAULT '',
    last_run_id    TEXT NOT NULL DEFAULT '',
    last_error     TEXT NOT NULL DEFAULT '',
    created_by     TEXT NOT NULL DEFAULT '',
    origin         TEXT NOT NULL DEFAULT '',   -- ipc | chat | config
    created_at     timestamptz NOT NULL
);
CREATE INDEX schedules_due ON schedules(next_run) WHERE status = 'active';
CREATE INDEX schedules_group ON schedules(group_folder);

CREATE TABLE schedule_fires (
    schedule_id  TEXT NOT NULL,
    due_at       timestamptz NOT NULL,
    started_at   timestamptz NOT NULL,
    duration_ms  INTEGER NOT NULL DEFAULT 0,
    status       TEXT NOT NULL,               -- ok | error | skipped
    run_id       TEXT NOT NULL DEFAULT '',
    result       TEXT NOT NULL DEFAULT '',
    error        TEXT NOT NULL DEFAULT '',
    owner        TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (schedule_id, due_at)
);

CREATE TABLE hook_deliveries (
    hook         TEXT NOT NULL,
    delivery_id  TEXT NOT NULL,
    received_at  timestamptz NOT NULL,
    status       TEXT NOT NULL,               -- started | filtered | failed
    run_id       TEXT NOT NULL DEFAULT '',
    reason       TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (hook, delivery_id)
);
CREATE INDEX hook_deliveries_received ON hook_deliveries(received_at);
