package host

import (
	"context"
	"log/slog"

	"nanohost/internal/channels/gate"
	"nanohost/internal/store"
)

// storeBook is the gate book: the in-memory book settles concurrent
// answers (first one wins), and every opening and settlement is recorded
// in the store's gates table — who answered what, and when — with the
// store's own compare-and-set, so the history survives restarts.
type storeBook struct {
	mem   *gate.MemBook
	store *store.Store
	log   *slog.Logger
}

func newStoreBook(s *store.Store, log *slog.Logger) *storeBook {
	return &storeBook{mem: gate.NewMemBook(), store: s, log: log}
}

func (b *storeBook) Open(ctx context.Context, g gate.Gate) (*gate.Gate, error) {
	replaced, err := b.mem.Open(ctx, g)
	if err != nil {
		return nil, err
	}
	_, _, err = b.store.CreateGate(ctx, store.Gate{
		RunID: g.RunID, GateID: g.GateID, NodeID: g.Question.Stage, Question: g.Question.Text,
		Choices: g.Question.Options, Nonce: g.Nonce, AskedAt: g.OpenedAt,
	})
	if err != nil {
		b.log.Warn("record gate", "run", g.RunID, "gate", g.GateID, "err", err)
	}
	return replaced, nil
}

func (b *storeBook) SetMessage(ctx context.Context, runID, gateID, nonce, msgID string) error {
	if err := b.mem.SetMessage(ctx, runID, gateID, nonce, msgID); err != nil {
		return err
	}
	if err := b.store.SetGateMessage(ctx, runID, gateID, msgID); err != nil {
		b.log.Warn("record gate message", "run", runID, "gate", gateID, "err", err)
	}
	return nil
}

func (b *storeBook) Resolve(ctx context.Context, runID, gateID, nonce string, r gate.Resolution) (bool, gate.Gate, error) {
	accepted, cur, err := b.mem.Resolve(ctx, runID, gateID, nonce, r)
	if err != nil || !accepted {
		return accepted, cur, err
	}
	stored, err := b.store.GetGate(ctx, runID, gateID)
	if err != nil {
		b.log.Warn("record gate answer", "run", runID, "gate", gateID, "err", err)
		return accepted, cur, nil
	}
	switch r.State {
	case gate.StateAnswered:
		answer := r.Choice
		if r.Text != "" {
			answer = r.Text // a freeform answer is its text, not the freeform edge's key
		}
		if _, _, err := b.store.AnswerGate(ctx, runID, gateID, stored.Nonce, answer, r.By); err != nil {
			b.log.Warn("record gate answer", "run", runID, "gate", gateID, "err", err)
		}
	case gate.StateTimedOut:
		_, _, _ = b.store.CloseGate(ctx, runID, gateID, store.GateTimeout)
	case gate.StateWithdrawn:
		_, _, _ = b.store.CloseGate(ctx, runID, gateID, store.GateCancelled)
	}
	return accepted, cur, nil
}

func (b *storeBook) Get(ctx context.Context, runID, gateID string) (gate.Gate, error) {
	return b.mem.Get(ctx, runID, gateID)
}
