package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"nanohost/internal/pipeline/engine"
)

// Delivery bookkeeping: rather than an outbox table duplicating run_events,
// each run carries a watermark, last_delivered_seq. Events are delivered to
// one chat thread per run in seq order, so "what is left to send" is
// exactly the events above the watermark (Undelivered), and a restarted
// host finds the runs with something left in RunsWithUndelivered.

// AppendEvent stores one event; see AppendEvents.
func (s *Store) AppendEvent(ctx context.Context, e engine.Event) (bool, error) {
	n, err := s.AppendEvents(ctx, []engine.Event{e})
	return n == 1, err
}

// AppendEvents stores events (of one or several runs) in one transaction
// and returns how many were new. The log is append-only: an event whose
// (run, seq) is already stored is ignored, never updated, so replaying a
// stream after a crash is harmless. Each event needs RunID (an existing
// run: else ErrNotFound), Seq > 0 and Type; a zero Time becomes now.
func (s *Store) AppendEvents(ctx context.Context, events []engine.Event) (int, error) {
	if len(events) == 0 {
		return 0, nil
	}
	events = slices.Clone(events) // encodeEvents fills in zero times
	payloads, err := encodeEvents(events)
	if err != nil {
		return 0, fmt.Errorf("append events: %w", err)
	}
	inserted, err := s.insertEvents(ctx, events, payloads)
	if err != nil {
		return 0, fmt.Errorf("append events: %w", err)
	}
	return inserted, nil
}

const insertEventSQL = `INSERT INTO run_events (run_id, seq, type, node_id, time, payload)
	VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (run_id, seq) DO NOTHING`

// insertEvents stores a single event as one autocommit statement (the
// trigger run_events_advance_last_seq updates runs.last_seq within it),
// and a batch in one transaction.
func (s *Store) insertEvents(ctx context.Context, events []engine.Event, payloads [][]byte) (int, error) {
	if s.writer == nil {
		return 0, ErrReadOnly
	}
	if len(events) == 1 {
		// An event of one run among many moving at once: it shares the
		// next commit with theirs (groupcommit.go).
		inserted := 0
		err := s.writeShared(ctx, func(db dbtx) (err error) {
			inserted, err = s.insertEvent(ctx, db, events[0], payloads[0])
			return err
		}, false)
		return inserted, err
	}
	inserted := 0
	err := s.write(ctx, func(tx *txn) error {
		for i, e := range events {
			n, err := s.insertEvent(ctx, tx, e, payloads[i])
			if err != nil {
				return err
			}
			inserted += n
		}
		return nil
	})
	return inserted, err
}

func (s *Store) insertEvent(ctx context.Context, db execer, e engine.Event, payload []byte) (int, error) {
	res, err := db.ExecContext(ctx, insertEventSQL, e.RunID, e.Seq, string(e.Type), e.NodeID, encTime(e.Time), string(payload))
	if s.violated(err, foreignKeyViolation) {
		return 0, fmt.Errorf("run %q: %w", e.RunID, ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("insert event %d of run %s: %w", e.Seq, e.RunID, err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// encodeEvents validates events and marshals them, outside the write
// transaction so the writer is held as briefly as possible.
func encodeEvents(events []engine.Event) ([][]byte, error) {
	payloads := make([][]byte, len(events))
	now := time.Now()
	for i := range events {
		e := &events[i]
		switch {
		case e.RunID == "":
			return nil, fmt.Errorf("event %d (%s): missing RunID", i, e.Type)
		case e.Seq <= 0:
			return nil, fmt.Errorf("event %d (%s) of run %s: seq %d must be positive", i, e.Type, e.RunID, e.Seq)
		case e.Type == "":
			return nil, fmt.Errorf("event %d of run %s (seq %d): missing Type", i, e.RunID, e.Seq)
		}
		if e.Time.IsZero() {
			e.Time = now
		}
		b, err := json.Marshal(e)
		if err != nil {
			return nil, fmt.Errorf("encode event %d of run %s (seq %d): %w", i, e.RunID, e.Seq, err)
		}
		payloads[i] = b
	}
	return payloads, nil
}

// Events returns a run's events with seq > afterSeq, in seq order, at most
// limit of them (limit <= 0: all). An unknown run has no events.
func (s *Store) Events(ctx context.Context, runID string, afterSeq int64, limit int) ([]engine.Event, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT payload FROM run_events
		WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT ?`, runID, afterSeq, s.limit(limit))
	if err != nil {
		return nil, fmt.Errorf("events of run %s: %w", runID, err)
	}
	events, err := collectEvents(rows)
	if err != nil {
		return nil, fmt.Errorf("events of run %s: %w", runID, err)
	}
	return events, nil
}

func collectEvents(rows *sql.Rows) ([]engine.Event, error) {
	defer rows.Close()
	var events []engine.Event
	for rows.Next() {
		var payload []byte
		if err := rows.Scan(&payload); err != nil {
			return nil, err
		}
		var e engine.Event
		if err := json.Unmarshal(payload, &e); err != nil {
			return nil, fmt.Errorf("decode stored event: %w", err)
		}
		events = append(events, upgradeEvent(e))
	}
	return events, rows.Err()
}

// upgradeEvent reads an event stored by an older version the way this one
// writes it: a run stopped early was a PipelineFailed marked in its Data
// ("cancelled", and "interrupted" when the host stopped it); it is now
// PipelineCancelled or PipelineInterrupted. Stored events never change.
func upgradeEvent(e engine.Event) engine.Event {
	if e.Type != engine.EventPipelineFailed {
		return e
	}
	cancelled, _ := e.Data["cancelled"].(bool)
	interrupted, _ := e.Data["interrupted"].(bool)
	switch {
	case interrupted:
		e.Type, e.Status, e.Message = engine.EventPipelineInterrupted, "", "interrupted"
	case cancelled:
		e.Type, e.Status = engine.EventPipelineCancelled, ""
	default:
		return e
	}
	delete(e.Data, "cancelled")
	delete(e.Data, "interrupted")
	return e
}

// LastEventSeq is the highest stored seq of a run (0: none yet): a
// resumed run numbers its events from here.
func (s *Store) LastEventSeq(ctx context.Context, runID string) (int64, error) {
	var seq int64
	err := s.reader.QueryRowContext(ctx, `SELECT last_seq FROM runs WHERE id = ?`, runID).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("last event seq: run %q: %w", runID, ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("last event seq of run %s: %w", runID, err)
	}
	return seq, nil
}

// SetDelivered records that the run's events up to seq reached its chat.
// The watermark only moves forward (an older seq is a no-op), and cannot
// pass the last stored event: store first, then deliver.
func (s *Store) SetDelivered(ctx context.Context, runID string, seq int64) error {
	if s.writer == nil {
		return ErrReadOnly
	}
	// One statement, in a commit shared with the other runs' small writes
	// (every thread's progress comes here): the check and the move see the
	// same row, and a refusal is explained after it (last_seq only grows).
	err := s.writeShared(ctx, func(db dbtx) error {
		res, err := db.ExecContext(ctx, `UPDATE runs SET last_delivered_seq =
			CASE WHEN last_delivered_seq < ? THEN ? ELSE last_delivered_seq END
			WHERE id = ? AND last_seq >= ?`, seq, seq, runID, seq)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			return err
		}
		var last int64
		err = db.QueryRowContext(ctx, `SELECT last_seq FROM runs WHERE id = ?`, runID).Scan(&last)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("run %q: %w", runID, ErrNotFound)
		case err == nil:
			return fmt.Errorf("seq %d is beyond the run's last stored event %d (append events before delivering them)", seq, last)
		}
		return err
	}, false)
	if err != nil {
		return fmt.Errorf("set delivered seq of run %s: %w", runID, err)
	}
	return nil
}

// Undelivered returns the run's events above its delivered watermark, in
// seq order, at most limit of them (limit <= 0: all).
func (s *Store) Undelivered(ctx context.Context, runID string, limit int) ([]engine.Event, error) {
	// One statement, so the watermark and the events come from one snapshot.
	rows, err := s.reader.QueryContext(ctx, `SELECT e.payload FROM run_events e JOIN runs r ON r.id = e.run_id
		WHERE e.run_id = ? AND e.seq > r.last_delivered_seq ORDER BY e.seq LIMIT ?`, runID, s.limit(limit))
	if err != nil {
		return nil, fmt.Errorf("undelivered events of run %s: %w", runID, err)
	}
	events, err := collectEvents(rows)
	if err != nil {
		return nil, fmt.Errorf("undelivered events of run %s: %w", runID, err)
	}
	return events, nil
}

// RunsWithUndelivered lists the ids of runs with events not yet delivered,
// oldest first: after a restart the host flushes these.
func (s *Store) RunsWithUndelivered(ctx context.Context) ([]string, error) {
	rows, err := s.reader.QueryContext(ctx,
		`SELECT id FROM runs WHERE last_seq > last_delivered_seq ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("runs with undelivered events: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("runs with undelivered events: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("runs with undelivered events: %w", err)
	}
	return ids, nil
}
