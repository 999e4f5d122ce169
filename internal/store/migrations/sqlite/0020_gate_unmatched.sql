-- 0020: a gate asked again because the answer before matched none of its
-- options keeps that answer (runs.Gate.Unmatched), so a posting made after
-- a restart says why it asks again, as the first one did.

ALTER TABLE gates ADD COLUMN unmatched TEXT NOT NULL DEFAULT '';
