-- 0012: which replica holds each group's chat conversation when several host
-- replicas share the database (SQLite's 0012). A group's agent container runs
-- on one replica's Docker: the holder of the group's lease, which renews it
-- every lease_ttl/3 as it renews its runs' leases; a lease past expires_at is
-- taken over by any replica, which resumes the conversation from the stored
-- session id. An inbound message stored unanswered wakes the replicas
-- (payload {"k": "m", "chat": chat id}), so the group's holder takes it at once.

CREATE TABLE group_leases (
    group_folder text PRIMARY KEY REFERENCES groups(folder) ON DELETE CASCADE,
    owner        text NOT NULL,             -- replica.id of the replica running the conversation
    expires_at   timestamptz NOT NULL       -- the database's clock: replicas' clocks may differ
);
CREATE INDEX group_leases_owner ON group_leases(owner);

CREATE FUNCTION nanohost_signal_message() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(nanohost_channel(), json_build_object('k', 'm', 'chat', NEW.chat_id)::text);
    RETURN NULL;
END $$;
CREATE TRIGGER messages_signal AFTER INSERT ON messages
    FOR EACH ROW WHEN (NEW.direction = 'in' AND NEW.processed_at IS NULL)
    EXECUTE FUNCTION nanohost_signal_message();
