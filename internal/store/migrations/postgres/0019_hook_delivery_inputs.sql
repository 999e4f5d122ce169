-- 0019: a webhook delivery keeps the run inputs read from its payload, so a
-- delivery left starting by a replica that died is finished by another one
-- with the same inputs, without the sender delivering it again
-- (docs/schedules.md, "Exactly once").

ALTER TABLE hook_deliveries ADD COLUMN inputs TEXT NOT NULL DEFAULT '';
CREATE INDEX hook_deliveries_starting ON hook_deliveries(status) WHERE status = 'starting';
