-- 0013: a run's inputs (key=value words in chat, start_pipeline's "inputs",
-- a schedule's or a webhook's mapping), as a JSON object of strings. Kept
-- with the run so that a run restarted before its first checkpoint, or taken
-- over by another replica, starts with the same input.<key> context keys.

ALTER TABLE runs ADD COLUMN inputs TEXT NOT NULL DEFAULT '';
