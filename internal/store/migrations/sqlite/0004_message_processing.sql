-- 0004: inbound chat messages carry a processed marker, set once the host
-- has dealt with them (the agent's reply was posted, or the message did not
-- call for one). A message stored but not yet processed when the host died
-- is queued again at the next start, exactly once.

ALTER TABLE messages ADD COLUMN processed_at TEXT;   -- NULL: not processed yet

-- Messages stored before this version were handled by the instance that
-- stored them: never answer them again.
UPDATE messages SET processed_at = created_at;

CREATE INDEX messages_unprocessed ON messages(id) WHERE processed_at IS NULL AND direction = 'in';
