-- 0006: signals between replicas (SQLite's 0006). A cancel asked of a run
-- is recorded on the run, for whichever replica drives it; and every change
-- another replica may be waiting on wakes it through LISTEN/NOTIFY on the
-- channel nanohost_channel() (one per schema, so databases sharing a server
-- do not wake each other). Triggers send them, so any writer — a replica,
-- a tool — wakes the replicas. Payloads are JSON: {"k": kind, "run": id,
-- "gate": id}, kind g (a gate settled), c (a cancel asked), r (a run's
-- events or status changed).

ALTER TABLE runs ADD COLUMN cancel_requested_by text NOT NULL DEFAULT '';

CREATE FUNCTION nanohost_channel() RETURNS text LANGUAGE sql STABLE
    AS $$ SELECT left('nanohost.' || current_schema(), 63) $$;

CREATE FUNCTION nanohost_signal_gate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(nanohost_channel(), json_build_object('k', 'g', 'run', NEW.run_id, 'gate', NEW.gate_id)::text);
    RETURN NULL;
END $$;
CREATE TRIGGER gates_signal AFTER UPDATE OF status ON gates
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION nanohost_signal_gate();

CREATE FUNCTION nanohost_signal_cancel() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(nanohost_channel(), json_build_object('k', 'c', 'run', NEW.id)::text);
    RETURN NULL;
END $$;
CREATE TRIGGER runs_signal_cancel AFTER UPDATE OF cancel_requested_by ON runs
    FOR EACH ROW WHEN (OLD.cancel_requested_by IS DISTINCT FROM NEW.cancel_requested_by)
    EXECUTE FUNCTION nanohost_signal_cancel();

-- A run's event log grew or its state changed: the dashboard's streams on
-- every replica wake. Notifications with the same payload in one
-- transaction are sent once.
CREATE FUNCTION nanohost_signal_run_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(nanohost_channel(), json_build_object('k', 'r', 'run', NEW.run_id)::text);
    RETURN NULL;
END $$;
CREATE TRIGGER run_events_signal AFTER INSERT ON run_events
    FOR EACH ROW EXECUTE FUNCTION nanohost_signal_run_events();

CREATE FUNCTION nanohost_signal_run_status() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(nanohost_channel(), json_build_object('k', 'r', 'run', NEW.id)::text);
    RETURN NULL;
END $$;
CREATE TRIGGER runs_signal_status AFTER UPDATE OF status ON runs
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION nanohost_signal_run_status();
