package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runs"
)

// Gates are the one authority on a human gate (runs.Gate): who answered
// what is decided by a compare-and-set on the gate's row, never in memory,
// so every process sharing the database sees the same winner.

// OpenGate records a posting of a gate being asked and returns the gate as
// stored. RunID, GateID and NodeID are required; an empty Nonce gets a
// random one, a zero AskedAt becomes now.
//
// A resumed run asks the same gate id again. If that gate was already
// answered or timed out (before a crash), nothing changes: stored is that
// settled gate, whose answer the run takes. Otherwise the gate is opened
// afresh as this posting (new nonce, no message yet), and previous is the
// posting it replaces — its prompt still shows buttons that no longer count.
func (s *Store) OpenGate(ctx context.Context, g runs.Gate) (stored runs.Gate, previous *runs.Gate, err error) {
	if err := prepareNewGate(&g); err != nil {
		return runs.Gate{}, nil, fmt.Errorf("open gate: %w", err)
	}
	choices, err := json.Marshal(g.Choices)
	if err != nil {
		return runs.Gate{}, nil, fmt.Errorf("open gate %s/%s: encode choices: %w", g.RunID, g.GateID, err)
	}
	// In a commit shared with other runs' small writes (a resume asks many
	// gates at once).
	err = s.writeShared(ctx, func(tx dbtx) error {
		stored, previous = runs.Gate{}, nil // run again alone if its batch failed
		// Locked until the posting is replaced: an answer to the old
		// posting waits, then finds the new nonce and is refused as stale.
		old, err := s.getGate(ctx, tx, g.RunID, g.GateID, s.b.forUpdate())
		switch {
		case err == nil && (old.Status == runs.GateAnswered || old.Status == runs.GateTimedOut):
			stored = old
			return nil
		case err == nil:
			previous = &old
		case !errors.Is(err, ErrNotFound):
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO gates (run_id, gate_id, node_id, question, choices,
			question_type, approvers, timeout_s, unmatched, nonce, message_ts, asked_at, status)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '', ?, 'open')
			ON CONFLICT (run_id, gate_id) DO UPDATE SET node_id = excluded.node_id, question = excluded.question,
				choices = excluded.choices, question_type = excluded.question_type, approvers = excluded.approvers,
				timeout_s = excluded.timeout_s, unmatched = excluded.unmatched, nonce = excluded.nonce, message_ts = '', asked_at = excluded.asked_at,
				status = 'open', option_index = 0, answer = '', answered_by = '', answered_at = NULL`,
			g.RunID, g.GateID, g.NodeID, g.Text, string(choices), string(g.Type), g.Approvers, g.TimeoutSeconds,
			g.Unmatched, g.Nonce, encTime(g.AskedAt))
		if s.violated(err, foreignKeyViolation) {
			return runNotFound(g.RunID)
		}
		if err != nil {
			return err
		}
		stored, err = s.getGate(ctx, tx, g.RunID, g.GateID, "")
		return err
	}, true)
	if err != nil {
		return runs.Gate{}, nil, fmt.Errorf("open gate %s/%s: %w", g.RunID, g.GateID, err)
	}
	return stored, previous, nil
}

func prepareNewGate(g *runs.Gate) error {
	if g.RunID == "" || g.GateID == "" || g.NodeID == "" {
		return fmt.Errorf("RunID, GateID and NodeID are required (got %q, %q, %q)", g.RunID, g.GateID, g.NodeID)
	}
	if g.Nonce == "" {
		g.Nonce = rand.Text()
	}
	if g.AskedAt.IsZero() {
		g.AskedAt = time.Now()
	}
	if g.Choices == nil {
		g.Choices = []engine.Option{}
	}
	return nil
}

// AnswerGate answers the open posting nonce of a gate: a compare-and-set,
// so of any number of concurrent answers (from any process) exactly one is
// accepted — the first. option is the chosen option's 1-based position
// (0: none), answer its value or the free text. It returns whether this
// answer was accepted and the gate as stored now; when not accepted,
// current says why: its Status is final (someone answered first, or it
// timed out or was withdrawn) or, still open, its Nonce is another
// posting's. A missing gate is ErrNotFound (and runs.ErrNoSuchGate).
func (s *Store) AnswerGate(ctx context.Context, runID, gateID, nonce string, option int, answer, by string) (accepted bool, current runs.Gate, err error) {
	if strings.TrimSpace(answer) == "" {
		return false, runs.Gate{}, fmt.Errorf("answer gate %s/%s: empty answer", runID, gateID)
	}
	now := encTime(time.Now())
	err = s.write(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `UPDATE gates SET status = 'answered', option_index = ?, answer = ?,
			answered_by = ?, answered_at = ? WHERE run_id = ? AND gate_id = ? AND nonce = ? AND status = 'open'`,
			option, answer, by, now, runID, gateID, nonce)
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		accepted = n == 1
		current, err = s.getGate(ctx, tx, runID, gateID, "")
		return err
	})
	if err != nil {
		return false, runs.Gate{}, fmt.Errorf("answer gate %s/%s: %w", runID, gateID, err)
	}
	return accepted, current, nil
}

// CloseGate ends the open posting nonce of a gate without an answer, as
// timed_out or withdrawn. Like AnswerGate it is a compare-and-set: closed
// reports whether this call ended it (false: it was already settled, or
// another posting is current), and current is the gate as stored now.
func (s *Store) CloseGate(ctx context.Context, runID, gateID, nonce string, status runs.GateState) (closed bool, current runs.Gate, err error) {
	if status != runs.GateTimedOut && status != runs.GateWithdrawn {
		return false, runs.Gate{}, fmt.Errorf("close gate %s/%s: state %q (want timed_out or withdrawn)", runID, gateID, status)
	}
	now := encTime(time.Now())
	err = s.write(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `UPDATE gates SET status = ?, answered_at = ?
			WHERE run_id = ? AND gate_id = ? AND nonce = ? AND status = 'open'`, status, now, runID, gateID, nonce)
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		closed = n == 1
		current, err = s.getGate(ctx, tx, runID, gateID, "")
		return err
	})
	if err != nil {
		return false, runs.Gate{}, fmt.Errorf("close gate %s/%s as %s: %w", runID, gateID, status, err)
	}
	return closed, current, nil
}

// WithdrawOpenGates withdraws every open gate of a run (it was cancelled
// or ended) and returns how many it withdrew.
func (s *Store) WithdrawOpenGates(ctx context.Context, runID string) (int, error) {
	var n int64
	err := s.write(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `UPDATE gates SET status = 'withdrawn', answered_at = ?
			WHERE run_id = ? AND status = 'open'`, encTime(time.Now()), runID)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("withdraw open gates of run %s: %w", runID, err)
	}
	return int(n), nil
}

// SetGateMessage records the chat message that asked posting nonce of a
// gate, so a reply or button click on that message finds it. A posting
// replaced meanwhile is left alone (ErrNotFound).
func (s *Store) SetGateMessage(ctx context.Context, runID, gateID, nonce, messageTS string) error {
	err := s.writeShared(ctx, func(db dbtx) error {
		res, err := db.ExecContext(ctx, `UPDATE gates SET message_ts = ? WHERE run_id = ? AND gate_id = ? AND nonce = ?`,
			messageTS, runID, gateID, nonce)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			return err
		}
		return gateNotFound(runID, gateID)
	}, false)
	if err != nil {
		return fmt.Errorf("set message of gate %s/%s: %w", runID, gateID, err)
	}
	return nil
}

const gateColumns = `g.run_id, g.gate_id, g.node_id, g.question, g.choices, g.question_type, g.approvers,
	g.timeout_s, g.unmatched, g.nonce, g.message_ts, g.asked_at, g.status, g.option_index, g.answer, g.answered_by, g.answered_at`

func scanGate(row rowScanner) (runs.Gate, error) {
	var g runs.Gate
	var choices string
	err := row.Scan(&g.RunID, &g.GateID, &g.NodeID, &g.Text, &choices, &g.Type, &g.Approvers, &g.TimeoutSeconds,
		&g.Unmatched, &g.Nonce, &g.MessageTS, timeCol{&g.AskedAt}, &g.Status, &g.Option, &g.Answer, &g.AnsweredBy, timeCol{&g.AnsweredAt})
	if err != nil {
		return runs.Gate{}, err
	}
	if err := json.Unmarshal([]byte(choices), &g.Choices); err != nil {
		return runs.Gate{}, fmt.Errorf("decode choices of gate %s/%s: %w", g.RunID, g.GateID, err)
	}
	return g, nil
}

// getGate reads one gate; lock is "" or the backend's forUpdate.
func (s *Store) getGate(ctx context.Context, q queryer, runID, gateID, lock string) (runs.Gate, error) {
	g, err := scanGate(q.QueryRowContext(ctx,
		`SELECT `+gateColumns+` FROM gates g WHERE g.run_id = ? AND g.gate_id = ?`+lock, runID, gateID))
	if errors.Is(err, sql.ErrNoRows) {
		return runs.Gate{}, gateNotFound(runID, gateID)
	}
	return g, err
}

// GetGate returns one gate.
func (s *Store) GetGate(ctx context.Context, runID, gateID string) (runs.Gate, error) {
	g, err := s.getGate(ctx, s.reader, runID, gateID, "")
	if err != nil {
		return runs.Gate{}, fmt.Errorf("get gate: %w", err)
	}
	return g, nil
}

// GateByMessage finds the gate asked by a chat message (the newest, should
// a message ts repeat).
func (s *Store) GateByMessage(ctx context.Context, chatID, messageTS string) (runs.Gate, error) {
	g, err := scanGate(s.reader.QueryRowContext(ctx, `SELECT `+gateColumns+`
		FROM gates g JOIN runs r ON r.id = g.run_id
		WHERE g.message_ts = ? AND r.chat_id = ? ORDER BY g.asked_at DESC LIMIT 1`, messageTS, chatID))
	if errors.Is(err, sql.ErrNoRows) {
		return runs.Gate{}, fmt.Errorf("gate asked by message %s in chat %s: %w", messageTS, chatID, ErrNotFound)
	}
	if err != nil {
		return runs.Gate{}, fmt.Errorf("gate asked by message %s in chat %s: %w", messageTS, chatID, err)
	}
	return g, nil
}

// OpenGates lists the open gates of all runs, oldest first.
func (s *Store) OpenGates(ctx context.Context) ([]runs.Gate, error) {
	return s.queryGates(ctx, "open gates",
		`SELECT `+gateColumns+` FROM gates g WHERE g.status = 'open' ORDER BY g.asked_at`)
}

// OpenGatesInChat lists the open gates of the runs reporting to a chat,
// oldest first; with thread set, only those of the run whose thread it is.
func (s *Store) OpenGatesInChat(ctx context.Context, chatID, thread string) ([]runs.Gate, error) {
	q := `SELECT ` + gateColumns + ` FROM gates g JOIN runs r ON r.id = g.run_id
		WHERE g.status = 'open' AND r.chat_id = ?`
	args := []any{chatID}
	if thread != "" {
		q += ` AND r.thread_ts = ?`
		args = append(args, thread)
	}
	return s.queryGates(ctx, "open gates in chat "+chatID, q+` ORDER BY g.asked_at`, args...)
}

// RunGates lists a run's gates in the order they were asked.
func (s *Store) RunGates(ctx context.Context, runID string) ([]runs.Gate, error) {
	return s.queryGates(ctx, "gates of run "+runID,
		`SELECT `+gateColumns+` FROM gates g WHERE g.run_id = ? ORDER BY g.asked_at, g.gate_id`, runID)
}

func (s *Store) queryGates(ctx context.Context, what, query string, args ...any) ([]runs.Gate, error) {
	rows, err := s.reader.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	var gates []runs.Gate
	for rows.Next() {
		g, err := scanGate(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		gates = append(gates, g)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return gates, nil
}
