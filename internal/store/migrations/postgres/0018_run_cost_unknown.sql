-- 0018: a run whose calls went (in part) to a model without a price says
-- its cost is unknown rather than $0 (SQLite's 0018): the model gateway
-- counted those calls' tokens but cannot price them.

ALTER TABLE runs ADD COLUMN cost_unknown boolean NOT NULL DEFAULT false;
