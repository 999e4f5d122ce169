-- 0004: inbound chat messages carry a processed marker, set once the host
-- has dealt with them (SQLite's 0004).

ALTER TABLE messages ADD COLUMN processed_at timestamptz;   -- NULL: not processed yet

-- Messages stored before this version were handled by the instance that
-- stored them: never answer them again.
UPDATE messages SET processed_at = created_at;

CREATE INDEX messages_unprocessed ON messages(id) WHERE processed_at IS NULL AND direction = 'in';
