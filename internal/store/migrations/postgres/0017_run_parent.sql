-- 0017: a sub-pipeline's child run names its parent run and node (SQLite's 0017).

ALTER TABLE runs ADD COLUMN parent_id text NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN parent_node text NOT NULL DEFAULT '';
CREATE INDEX runs_parent ON runs (parent_id, created_at) WHERE parent_id <> '';
