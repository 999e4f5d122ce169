-- 0009: inbound chat envelopes claimed once among the replicas (SQLite's
-- 0009). A chat may deliver an event again, to any replica's connection;
-- the replica whose claim (the transport's event or trigger id) is stored
-- first handles it, the others drop it. Claims older than a day are pruned.

CREATE TABLE inbound_claims (
    key        text PRIMARY KEY,
    replica    text NOT NULL,
    claimed_at timestamptz NOT NULL
);
CREATE INDEX inbound_claims_at ON inbound_claims(claimed_at);
