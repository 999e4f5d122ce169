-- 0005: one state vocabulary for runs and gates (internal/runs), and gates
-- that remember their whole question and the chosen option (SQLite's 0005,
-- which rebuilds the tables; PostgreSQL changes them in place).
--
--   runs.status   success → succeeded, fail → failed
--   gates.status  timeout → timed_out, cancelled → withdrawn
--   gates         + question_type, approvers, timeout_s, option_index

ALTER TABLE runs DROP CONSTRAINT runs_status_check;
UPDATE runs SET status = CASE status WHEN 'success' THEN 'succeeded' WHEN 'fail' THEN 'failed' ELSE status END;
ALTER TABLE runs ADD CONSTRAINT runs_status_check
    CHECK (status IN ('queued', 'running', 'waiting', 'interrupted', 'succeeded', 'failed', 'cancelled'));

ALTER TABLE gates DROP CONSTRAINT gates_status_check;
UPDATE gates SET status = CASE status WHEN 'timeout' THEN 'timed_out' WHEN 'cancelled' THEN 'withdrawn' ELSE status END;
ALTER TABLE gates ADD CONSTRAINT gates_status_check
    CHECK (status IN ('open', 'answered', 'timed_out', 'withdrawn'));

ALTER TABLE gates
    ADD COLUMN question_type text NOT NULL DEFAULT '',
    ADD COLUMN approvers     text NOT NULL DEFAULT '',            -- the node's approvers attribute
    ADD COLUMN timeout_s     double precision NOT NULL DEFAULT 0,
    ADD COLUMN option_index  integer NOT NULL DEFAULT 0;          -- 1-based chosen option, 0 for none
