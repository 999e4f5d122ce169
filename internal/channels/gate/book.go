// Package gate runs human gates over chat: it posts a gate prompt in a run's
// thread, takes the first authorized answer (compare-and-set in a Book), edits
// the prompt to say who chose what, and turns timeouts into
// engine.AnswerTimeout. Desk.Interviewer is the engine.Interviewer the host
// hands to the engine for a run.
package gate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"nanohost/internal/pipeline/engine"
)

// State is where a gate is in its life.
type State string

const (
	StateOpen      State = "open"
	StateAnswered  State = "answered"
	StateTimedOut  State = "timed_out"
	StateWithdrawn State = "withdrawn"
)

// Gate is one posting of a human gate. (RunID, GateID) names the gate;
// Nonce names this posting, so a button of an earlier posting (before a
// host restart, say) cannot answer it.
type Gate struct {
	RunID  string
	GateID string
	Nonce  string

	Channel string // channel name, e.g. "slack"
	Chat    string
	Thread  string
	MsgID   string // the prompt message, once posted

	Question  engine.Question
	StartedBy string // who started the run
	OpenedAt  time.Time

	State State
	// Choice is the chosen option's value (key or label); Text the free
	// text of a freeform answer.
	Choice     string
	Text       string
	AnsweredBy string
	AnsweredAt time.Time
}

// Resolution settles a gate.
type Resolution struct {
	State  State // StateAnswered, StateTimedOut or StateWithdrawn
	Choice string
	Text   string
	By     string
	At     time.Time
}

// ErrUnknownGate means no gate with that run and id was ever opened (or it
// was forgotten).
var ErrUnknownGate = errors.New("no such gate")

// ErrStaleNonce means the answer came from an older posting of the gate.
var ErrStaleNonce = errors.New("answer is for an older posting of this gate")

// Book records gates and settles each with compare-and-set: the first
// resolution wins, every later one is told who won. The host can back it
// with SQLite so answers survive restarts; MemBook is the in-memory one.
type Book interface {
	// Open records a new posting of a gate, replacing any earlier posting
	// of the same (RunID, GateID). It returns the replaced posting if that
	// was still open, so its prompt can be withdrawn.
	Open(ctx context.Context, g Gate) (replaced *Gate, err error)
	// SetMessage records the prompt message of a posting.
	SetMessage(ctx context.Context, runID, gateID, nonce, msgID string) error
	// Resolve settles the posting if it is still open. accepted is false
	// when it was already settled; current is the gate as it now stands
	// (current.AnsweredBy says who won). Errors: ErrUnknownGate,
	// ErrStaleNonce (current is then the newer posting).
	Resolve(ctx context.Context, runID, gateID, nonce string, r Resolution) (accepted bool, current Gate, err error)
	// Get returns the latest posting of a gate, or ErrUnknownGate.
	Get(ctx context.Context, runID, gateID string) (Gate, error)
}

// MemBook is an in-memory Book.
type MemBook struct {
	mu    sync.Mutex
	gates map[gateKey]Gate
}

type gateKey struct{ run, gate string }

// NewMemBook returns an empty in-memory Book.
func NewMemBook() *MemBook { return &MemBook{gates: make(map[gateKey]Gate)} }

// Open implements Book.
func (b *MemBook) Open(_ context.Context, g Gate) (*Gate, error) {
	if g.RunID == "" || g.GateID == "" || g.Nonce == "" {
		return nil, fmt.Errorf("open gate: run id, gate id and nonce are required (got %q, %q, %q)", g.RunID, g.GateID, g.Nonce)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	k := gateKey{g.RunID, g.GateID}
	var replaced *Gate
	if old, ok := b.gates[k]; ok && old.State == StateOpen {
		replaced = &old
	}
	g.State = StateOpen
	b.gates[k] = g
	return replaced, nil
}

// SetMessage implements Book.
func (b *MemBook) SetMessage(_ context.Context, runID, gateID, nonce, msgID string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	g, err := b.postingLocked(runID, gateID, nonce)
	if err != nil {
		return err
	}
	g.MsgID = msgID
	b.gates[gateKey{runID, gateID}] = g
	return nil
}

// Resolve implements Book.
func (b *MemBook) Resolve(_ context.Context, runID, gateID, nonce string, r Resolution) (bool, Gate, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	g, err := b.postingLocked(runID, gateID, nonce)
	switch {
	case errors.Is(err, ErrStaleNonce):
		return false, g, err
	case err != nil:
		return false, Gate{}, err
	case g.State != StateOpen:
		return false, g, nil
	}
	g.State, g.Choice, g.Text, g.AnsweredBy, g.AnsweredAt = r.State, r.Choice, r.Text, r.By, r.At
	b.gates[gateKey{runID, gateID}] = g
	return true, g, nil
}

// postingLocked returns the gate if nonce is its latest posting; with
// ErrStaleNonce it returns the newer posting.
func (b *MemBook) postingLocked(runID, gateID, nonce string) (Gate, error) {
	g, ok := b.gates[gateKey{runID, gateID}]
	switch {
	case !ok:
		return Gate{}, fmt.Errorf("gate %s of run %s: %w", gateID, runID, ErrUnknownGate)
	case g.Nonce != nonce:
		return g, fmt.Errorf("gate %s of run %s: %w", gateID, runID, ErrStaleNonce)
	}
	return g, nil
}

// Get implements Book.
func (b *MemBook) Get(_ context.Context, runID, gateID string) (Gate, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	g, ok := b.gates[gateKey{runID, gateID}]
	if !ok {
		return Gate{}, fmt.Errorf("gate %s of run %s: %w", gateID, runID, ErrUnknownGate)
	}
	return g, nil
}
