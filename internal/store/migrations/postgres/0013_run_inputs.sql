-- 0013: a run's inputs, as a JSON object of strings (SQLite's 0013).

ALTER TABLE runs ADD COLUMN inputs text NOT NULL DEFAULT '';
