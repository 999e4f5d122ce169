-- 0008: one deliverer per run's chat thread (PostgreSQL's 0008). The
-- process that tells a run in its thread holds a claim until
-- delivery_until, renewed while it delivers; another takes the thread over
-- only once the claim has run out, from the delivered watermark.

ALTER TABLE runs ADD COLUMN delivery_by TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN delivery_until TEXT;
