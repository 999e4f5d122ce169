-- 0008: one deliverer per run's chat thread (SQLite's 0008). The replica
-- that tells a run in its thread holds a claim until delivery_until,
-- renewed while it delivers; another replica takes the thread over only
-- once the claim has run out, from the delivered watermark.

ALTER TABLE runs
    ADD COLUMN delivery_by    text NOT NULL DEFAULT '',
    ADD COLUMN delivery_until timestamptz;
