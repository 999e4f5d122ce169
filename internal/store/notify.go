package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"nanohost/internal/runs"
)

// Signals between host replicas sharing a PostgreSQL store. Whatever one
// replica must act on when another changes it — a gate answered, a cancel
// asked, a run's events — is a store write first; triggers on those tables
// (migration 0006) then NOTIFY the schema's channel, and every replica's
// listener, on a connection of its own, wakes what waits on that run. A
// wake carries no data: the waiter re-reads the store. A listener that
// lost its connection reconnects and says "anything may have changed"
// (runs.WakeAll); the runs service also re-reads on a timer, so a wake
// lost in between costs latency, never an answer.

// RequestCancel records that who asked to cancel an unfinished run; the
// first asker is kept. It wakes the replicas (on PostgreSQL). A finished
// run is ErrRunFinished, an unknown one ErrNotFound.
func (s *Store) RequestCancel(ctx context.Context, runID, who string) error {
	if who == "" {
		who = "unknown"
	}
	err := s.write(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `UPDATE runs SET cancel_requested_by =
			CASE WHEN cancel_requested_by = '' THEN ? ELSE cancel_requested_by END
			WHERE id = ? AND status NOT IN ('succeeded', 'failed', 'cancelled')`, who, runID)
		if err != nil {
			return err
		}
		return explainNoRunChange(ctx, tx, res, runID)
	})
	if err != nil {
		return fmt.Errorf("request cancel of run %s: %w", runID, err)
	}
	return nil
}

// CancelRequested is who asked to cancel the run ("" for nobody).
func (s *Store) CancelRequested(ctx context.Context, runID string) (string, error) {
	var who string
	err := s.reader.QueryRowContext(ctx, `SELECT cancel_requested_by FROM runs WHERE id = ?`, runID).Scan(&who)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("cancel of run %s: %w", runID, runNotFound(runID))
	}
	if err != nil {
		return "", fmt.Errorf("cancel of run %s: %w", runID, err)
	}
	return who, nil
}

// CancelsRequested maps each unfinished run someone asked to cancel to who
// asked: one query for all of a process's runs.
func (s *Store) CancelsRequested(ctx context.Context) (map[string]string, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT id, cancel_requested_by FROM runs
		WHERE cancel_requested_by <> '' AND status NOT IN ('succeeded', 'failed', 'cancelled')`)
	if err != nil {
		return nil, fmt.Errorf("cancels requested: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, who string
		if err := rows.Scan(&id, &who); err != nil {
			return nil, fmt.Errorf("cancels requested: %w", err)
		}
		out[id] = who
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("cancels requested: %w", err)
	}
	return out, nil
}

// Wakeups is the store's wakes for the runs service (runs.Config.Wakeups):
// on PostgreSQL a listener that logs its connection's troubles to log; on
// SQLite nil, as nothing announces changes there.
func (s *Store) Wakeups(log *slog.Logger) runs.Wakeups {
	if s.pg == nil {
		return nil
	}
	if log == nil {
		log = slog.Default()
	}
	return &listener{cfg: s.pg.connConfig, log: log.With("component", "store-listener")}
}

// listener keeps a LISTEN connection of its own to PostgreSQL.
type listener struct {
	cfg *pgx.ConnConfig
	log *slog.Logger
}

// Reconnection backoff of a listener whose connection failed.
const (
	listenBackoffMin = 100 * time.Millisecond
	listenBackoffMax = 5 * time.Second
)

// Listen implements runs.Wakeups.
func (l *listener) Listen(ctx context.Context, fn func(runs.Wake)) {
	backoff := listenBackoffMin
	for ctx.Err() == nil {
		listening := func() { backoff = listenBackoffMin; fn(runs.Wake{Kind: runs.WakeAll}) }
		err := l.session(ctx, listening, fn)
		if ctx.Err() != nil {
			return
		}
		l.log.Warn("store notifications: connection lost; reconnecting (meanwhile replicas learn of changes by re-reading)",
			"err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, listenBackoffMax)
	}
}

// session connects, listens on the schema's channel, calls listening, and
// then fn for each notification until the connection fails or ctx ends.
func (l *listener) session(ctx context.Context, listening func(), fn func(runs.Wake)) error {
	connectCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	conn, err := pgx.ConnectConfig(connectCtx, l.cfg.Copy())
	cancel()
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var channel string
	if err := conn.QueryRow(ctx, `SELECT nanohost_channel()`).Scan(&channel); err != nil {
		return fmt.Errorf("name the channel: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return fmt.Errorf("listen on %s: %w", channel, err)
	}
	// Changes made before LISTEN took effect sent nobody a wake.
	listening()
	for {
		n, err := l.next(ctx, conn)
		if err != nil {
			return err
		}
		if n == nil {
			continue // quiet, and the connection answers
		}
		w, ok := decodeWake(n.Payload)
		if !ok {
			l.log.Warn("store notifications: payload not understood; ignored", "payload", n.Payload)
			continue
		}
		fn(w)
	}
}

// listenProbe is how long a listener waits quietly before it checks that
// its connection still answers: a connection cut without a word (a
// network partition, a server failover) is found within about this long.
const listenProbe = 30 * time.Second

// next waits for a notification; nil after listenProbe of silence on a
// connection that still answers.
func (l *listener) next(ctx context.Context, conn *pgx.Conn) (*pgconn.Notification, error) {
	waitCtx, cancel := context.WithTimeout(ctx, listenProbe)
	n, err := conn.WaitForNotification(waitCtx)
	cancel()
	if err == nil || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) && !pgconn.Timeout(err) {
		return n, err
	}
	pingCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := conn.Ping(pingCtx); err != nil {
		return nil, fmt.Errorf("the connection stopped answering: %w", err)
	}
	return nil, nil
}

// decodeWake reads a notification's payload (see migrations 0006 and 0012).
func decodeWake(payload string) (runs.Wake, bool) {
	var p struct {
		K    string `json:"k"`
		Run  string `json:"run"`
		Gate string `json:"gate"`
		Chat string `json:"chat"`
	}
	if err := json.Unmarshal([]byte(payload), &p); err != nil {
		return runs.Wake{}, false
	}
	if p.K == "m" && p.Chat != "" { // migration 0012: a message waits for its group
		return runs.Wake{Kind: runs.WakeMessage, Chat: p.Chat}, true
	}
	if p.Run == "" {
		return runs.Wake{}, false
	}
	kinds := map[string]runs.WakeKind{"g": runs.WakeGate, "c": runs.WakeCancel, "r": runs.WakeRun}
	kind, ok := kinds[p.K]
	return runs.Wake{Kind: kind, RunID: p.Run, GateID: p.Gate}, ok
}
