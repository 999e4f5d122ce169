-- 0009: inbound chat envelopes claimed once among the processes sharing
-- the store (PostgreSQL's 0009). A chat may deliver an event again, to any
-- replica's connection; the one whose claim (the transport's event or
-- trigger id) is stored first handles it. Claims older than a day are pruned.

CREATE TABLE inbound_claims (
    key        TEXT PRIMARY KEY,
    replica    TEXT NOT NULL,
    claimed_at TEXT NOT NULL
);
CREATE INDEX inbound_claims_at ON inbound_claims(claimed_at);
