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

	"github.com/mattn/go-sqlite3"

	"nanohost/internal/pipeline/engine"
)

// GateStatus is where a human gate is: open until answered, timed out or
// cancelled; those three are final.
type GateStatus string

const (
	GateOpen      GateStatus = "open"
	GateAnswered  GateStatus = "answered"
	GateTimeout   GateStatus = "timeout"
	GateCancelled GateStatus = "cancelled"
)

// Gate is one asking of a wait.human question in a chat.
type Gate struct {
	RunID    string          `json:"run_id"`
	GateID   string          `json:"gate_id"` // engine Question.ID
	NodeID   string          `json:"node_id"`
	Question string          `json:"question"`
	Choices  []engine.Option `json:"choices"`
	// Nonce is carried by the gate's buttons; only an answer with it counts.
	Nonce     string     `json:"nonce"`
	MessageTS string     `json:"message_ts,omitempty"` // the chat message that asked
	AskedAt   time.Time  `json:"asked_at"`
	Status    GateStatus `json:"status"`
	// Answer is the chosen option key/label or free text.
	Answer     string    `json:"answer,omitempty"`
	AnsweredBy string    `json:"answered_by,omitempty"`
	AnsweredAt time.Time `json:"answered_at,omitzero"`
}

// CreateGate records a question being asked and returns the stored gate.
// RunID, GateID and NodeID are required; an empty Nonce gets a random one,
// a zero AskedAt becomes now. If the gate already exists (a resumed run
// asks the same question id again) nothing changes and created is false:
// the caller reuses the stored gate — and its answer, if one arrived
// before the crash.
func (s *Store) CreateGate(ctx context.Context, g Gate) (stored Gate, created bool, err error) {
	if err := prepareNewGate(&g); err != nil {
		return Gate{}, false, fmt.Errorf("create gate: %w", err)
	}
	choices, err := json.Marshal(g.Choices)
	if err != nil {
		return Gate{}, false, fmt.Errorf("create gate %s/%s: encode choices: %w", g.RunID, g.GateID, err)
	}
	err = s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO gates (run_id, gate_id, node_id, question, choices,
			nonce, message_ts, asked_at, status) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'open')
			ON CONFLICT (run_id, gate_id) DO NOTHING`,
			g.RunID, g.GateID, g.NodeID, g.Question, string(choices), g.Nonce, g.MessageTS, encTime(g.AskedAt))
		if isConstraint(err, sqlite3.ErrConstraintForeignKey) {
			return fmt.Errorf("run %q: %w", g.RunID, ErrNotFound)
		}
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		created = n == 1
		stored, err = getGate(ctx, tx, g.RunID, g.GateID)
		return err
	})
	if err != nil {
		return Gate{}, false, fmt.Errorf("create gate %s/%s: %w", g.RunID, g.GateID, err)
	}
	return stored, created, nil
}

func prepareNewGate(g *Gate) error {
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

// AnswerGate answers an open gate if nonce matches: a compare-and-set, so
// of any number of concurrent answers exactly one is accepted — the first.
// It returns whether this answer was accepted and the gate as stored now.
// When not accepted, current tells why: Status is final (someone answered
// first, or it timed out or was cancelled) or, if still open, the nonce
// was stale (a button from an earlier asking). ErrNotFound: no such gate.
func (s *Store) AnswerGate(ctx context.Context, runID, gateID, nonce, answer, by string) (accepted bool, current Gate, err error) {
	if strings.TrimSpace(answer) == "" {
		return false, Gate{}, fmt.Errorf("answer gate %s/%s: empty answer", runID, gateID)
	}
	now := encTime(time.Now())
	err = s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE gates SET status = 'answered', answer = ?, answered_by = ?,
			answered_at = ? WHERE run_id = ? AND gate_id = ? AND nonce = ? AND status = 'open'`,
			answer, by, now, runID, gateID, nonce)
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		accepted = n == 1
		current, err = getGate(ctx, tx, runID, gateID)
		return err
	})
	if err != nil {
		return false, Gate{}, fmt.Errorf("answer gate %s/%s: %w", runID, gateID, err)
	}
	return accepted, current, nil
}

// CloseGate ends an open gate without an answer, as timeout or cancelled.
// Like AnswerGate it is a compare-and-set: closed reports whether this
// call ended it (false: it was already answered or closed), and current is
// the gate as stored now.
func (s *Store) CloseGate(ctx context.Context, runID, gateID string, status GateStatus) (closed bool, current Gate, err error) {
	if status != GateTimeout && status != GateCancelled {
		return false, Gate{}, fmt.Errorf("close gate %s/%s: status %q (want timeout or cancelled)", runID, gateID, status)
	}
	now := encTime(time.Now())
	err = s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE gates SET status = ?, answered_at = ?
			WHERE run_id = ? AND gate_id = ? AND status = 'open'`, status, now, runID, gateID)
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		closed = n == 1
		current, err = getGate(ctx, tx, runID, gateID)
		return err
	})
	if err != nil {
		return false, Gate{}, fmt.Errorf("close gate %s/%s as %s: %w", runID, gateID, status, err)
	}
	return closed, current, nil
}

// CancelOpenGates cancels every open gate of a run (the run was cancelled
// or failed) and returns how many it cancelled.
func (s *Store) CancelOpenGates(ctx context.Context, runID string) (int, error) {
	var n int64
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE gates SET status = 'cancelled', answered_at = ?
			WHERE run_id = ? AND status = 'open'`, encTime(time.Now()), runID)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("cancel open gates of run %s: %w", runID, err)
	}
	return int(n), nil
}

// SetGateMessage records the chat message that asked the gate, so a reply
// or button click on that message finds it (GateByMessage).
func (s *Store) SetGateMessage(ctx context.Context, runID, gateID, messageTS string) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE gates SET message_ts = ? WHERE run_id = ? AND gate_id = ?`,
			messageTS, runID, gateID)
		if err != nil {
			return err
		}
		return requireOneRow(res, "gate", runID+"/"+gateID)
	})
	if err != nil {
		return fmt.Errorf("set message of gate %s/%s: %w", runID, gateID, err)
	}
	return nil
}

const gateColumns = `g.run_id, g.gate_id, g.node_id, g.question, g.choices, g.nonce, g.message_ts,
	g.asked_at, g.status, g.answer, g.answered_by, g.answered_at`

func scanGate(row rowScanner) (Gate, error) {
	var g Gate
	var choices string
	err := row.Scan(&g.RunID, &g.GateID, &g.NodeID, &g.Question, &choices, &g.Nonce, &g.MessageTS,
		timeCol{&g.AskedAt}, &g.Status, &g.Answer, &g.AnsweredBy, timeCol{&g.AnsweredAt})
	if err != nil {
		return Gate{}, err
	}
	if err := json.Unmarshal([]byte(choices), &g.Choices); err != nil {
		return Gate{}, fmt.Errorf("decode choices of gate %s/%s: %w", g.RunID, g.GateID, err)
	}
	return g, nil
}

func getGate(ctx context.Context, q queryer, runID, gateID string) (Gate, error) {
	g, err := scanGate(q.QueryRowContext(ctx,
		`SELECT `+gateColumns+` FROM gates g WHERE g.run_id = ? AND g.gate_id = ?`, runID, gateID))
	if errors.Is(err, sql.ErrNoRows) {
		return Gate{}, fmt.Errorf("gate %s/%s: %w", runID, gateID, ErrNotFound)
	}
	return g, err
}

// GetGate returns one gate.
func (s *Store) GetGate(ctx context.Context, runID, gateID string) (Gate, error) {
	g, err := getGate(ctx, s.reader, runID, gateID)
	if err != nil {
		return Gate{}, fmt.Errorf("get gate: %w", err)
	}
	return g, nil
}

// GateByMessage finds the gate asked by a chat message (the newest, should
// a message ts repeat).
func (s *Store) GateByMessage(ctx context.Context, chatID, messageTS string) (Gate, error) {
	g, err := scanGate(s.reader.QueryRowContext(ctx, `SELECT `+gateColumns+`
		FROM gates g JOIN runs r ON r.id = g.run_id
		WHERE g.message_ts = ? AND r.chat_id = ? ORDER BY g.asked_at DESC LIMIT 1`, messageTS, chatID))
	if errors.Is(err, sql.ErrNoRows) {
		return Gate{}, fmt.Errorf("gate asked by message %s in chat %s: %w", messageTS, chatID, ErrNotFound)
	}
	if err != nil {
		return Gate{}, fmt.Errorf("gate asked by message %s in chat %s: %w", messageTS, chatID, err)
	}
	return g, nil
}

// OpenGates lists the open gates of all runs, oldest first: after a
// restart the host re-arms their timeouts and listeners.
func (s *Store) OpenGates(ctx context.Context) ([]Gate, error) {
	return s.queryGates(ctx, "open gates",
		`SELECT `+gateColumns+` FROM gates g WHERE g.status = 'open' ORDER BY g.asked_at`)
}

// RunGates lists a run's gates in the order they were asked.
func (s *Store) RunGates(ctx context.Context, runID string) ([]Gate, error) {
	return s.queryGates(ctx, "gates of run "+runID,
		`SELECT `+gateColumns+` FROM gates g WHERE g.run_id = ? ORDER BY g.asked_at, g.gate_id`, runID)
}

func (s *Store) queryGates(ctx context.Context, what, query string, args ...any) ([]Gate, error) {
	rows, err := s.reader.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	var gates []Gate
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
