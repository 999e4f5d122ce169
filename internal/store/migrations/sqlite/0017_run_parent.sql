-- 0017: a sub-pipeline's child run names its parent run and the parent's
-- node that runs it (engine type="pipeline"): the dashboard links them both
-- ways, and a parent resumed after a crash finds its child to resume.

ALTER TABLE runs ADD COLUMN parent_id TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN parent_node TEXT NOT NULL DEFAULT '';
CREATE INDEX runs_parent ON runs (parent_id, created_at) WHERE parent_id <> '';
