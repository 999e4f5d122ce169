package runs

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"nanohost/internal/pipeline/engine"
)

// How a human gate is asked and answered. The store decides: asking opens a
// posting of the gate there; an answer — from any surface, any process — is
// a compare-and-set there; the first wins. This process only holds the
// askers waiting on the store, woken by the answers it takes itself and
// re-reading the store now and then for answers taken elsewhere.

// promptEditTimeout bounds an edit of a settled gate's prompt (cosmetic:
// the run never waits for it).
const promptEditTimeout = 2 * time.Minute

// answerToldWait bounds how long a run waits, once answered, for its
// prompt to say who chose what: the thread then reads "<done mark> you chose [A]
// Approve" before the lines of what the answer led to. A chat slower than
// this does not hold the run up longer; the edit goes on behind it.
const answerToldWait = 2 * time.Second

// promptPostTimeout bounds how long posting a prompt is retried. The gate
// does not wait for it: it is open, can be answered elsewhere (the
// dashboard) and times out meanwhile.
const promptPostTimeout = 30 * time.Minute

// gates asks runs' human gates and takes their answers: the one part of the
// service that opens, waits on and settles gates. Its dependencies are the
// store's gates, the endpoints' policies, and the service's background work
// (prompt posts and edits, which Shutdown waits for).
type gates struct {
	store    gateStore
	policies Policies
	log      *slog.Logger
	now      func() time.Time
	bg       *sync.WaitGroup
	waiting  waiters
}

// gateStore is what gates need of the store.
type gateStore interface {
	GetRun(ctx context.Context, id string) (Run, error)
	OpenGate(ctx context.Context, g Gate) (stored Gate, previous *Gate, err error)
	SetGateMessage(ctx context.Context, runID, gateID, nonce, msgID string) error
	GetGate(ctx context.Context, runID, gateID string) (Gate, error)
	AnswerGate(ctx context.Context, runID, gateID, nonce string, option int, answer, by string) (accepted bool, current Gate, err error)
	CloseGate(ctx context.Context, runID, gateID, nonce string, s GateState) (closed bool, current Gate, err error)
	OpenGatesInChat(ctx context.Context, chat, thread string) ([]Gate, error)
	OpenGates(ctx context.Context) ([]Gate, error)
}

// waiters are the askers of this process, by gate.
type waiters struct {
	mu sync.Mutex
	m  map[gateKey]*asker
}

type gateKey struct{ run, gate string }

func (w *waiters) add(a *asker) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[gateKey]*asker{}
	}
	w.m[gateKey{a.gate.RunID, a.gate.GateID}] = a
}

func (w *waiters) remove(a *asker) {
	w.mu.Lock()
	defer w.mu.Unlock()
	k := gateKey{a.gate.RunID, a.gate.GateID}
	if w.m[k] == a {
		delete(w.m, k)
	}
}

// wake tells the asker of a gate, if it is here, that the store changed.
func (w *waiters) wake(runID, gateID string) {
	w.mu.Lock()
	a := w.m[gateKey{runID, gateID}]
	w.mu.Unlock()
	if a != nil {
		poke(a.wake)
	}
}

// stale wakes the askers here whose posting is no longer among open, the
// gates open in the store: they re-read theirs.
func (w *waiters) stale(open []Gate) {
	isOpen := make(map[gateKey]string, len(open))
	for _, g := range open {
		isOpen[gateKey{g.RunID, g.GateID}] = g.Nonce
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, a := range w.m {
		if nonce, ok := isOpen[k]; !ok || nonce != a.gate.Nonce {
			poke(a.wake)
		}
	}
}

func (w *waiters) len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.m)
}

// wakeAll wakes every asker here (wakes may have been missed).
func (w *waiters) wakeAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, a := range w.m {
		poke(a.wake)
	}
}

// asker is one Ask waiting on one posting of a gate.
type asker struct {
	gates  *gates
	thread Thread
	gate   Gate // the posting, as opened
	wake   chan struct{}

	mu    sync.Mutex
	msgID string // the prompt, once posted
	final *Gate  // how it ended, once it has
	note  GateNote
}

// interviewer asks run's gates in its thread.
// While a gate waits the run holds no run slot (slots.go).
func (gs *gates) interviewer(run Run, t Thread, slot *runSlot) engine.Interviewer {
	return engine.InterviewerFunc(func(ctx context.Context, q engine.Question) (engine.Answer, error) {
		slot.gateWaits()
		defer slot.gateSettled(ctx)
		return gs.ask(ctx, t, q)
	})
}

// ask opens a posting of q's gate, posts its prompt in the background (a
// chat that is slow or down never holds up the gate, which is open — and
// its timeout running — from the start) and waits for it to be settled: an
// answer, the timeout, or ctx's end (then it is withdrawn).
func (gs *gates) ask(ctx context.Context, t Thread, q engine.Question) (engine.Answer, error) {
	stored, previous, err := gs.store.OpenGate(ctx, NewGate(q, newNonce(), gs.now()))
	if err != nil {
		return engine.Answer{}, fmt.Errorf("open gate %s: %w", q.ID, err)
	}
	if stored.Status != GateOpen {
		// Settled before a crash: the run takes that answer.
		gs.log.Info("gate was settled before the restart; taking its answer", "run", q.RunID, "gate", q.ID, "state", stored.Status)
		gs.editPrompt(t, stored, "")
		return stored.EngineAnswer(), nil
	}
	if previous != nil && previous.MessageTS != "" {
		// An earlier posting (before a restart) still shows buttons.
		stale := *previous
		stale.Status = GateWithdrawn
		gs.editPrompt(t, stale, NoteSuperseded)
	}
	a := &asker{gates: gs, thread: t, gate: stored, wake: make(chan struct{}, 1)}
	gs.waiting.add(a)
	defer gs.waiting.remove(a)
	gs.bg.Go(func() { a.post(ctx) })
	return a.wait(ctx)
}

// post posts the prompt. It goes on even if the run stops meanwhile: a
// prompt that reached the chat but whose id was lost would show live
// buttons forever; once posted, a settled gate's prompt is edited at once.
func (a *asker) post(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), promptPostTimeout)
	defer cancel()
	g := a.gate
	log := a.gates.log.With("run", g.RunID, "gate", g.GateID)
	msgID, err := a.thread.Ask(ctx, g)
	if err != nil {
		log.Error("gate prompt not posted; the gate stays open (dashboard, timeout)", "err", err)
		return
	}
	log.Info("gate opened", "msg", msgID, "timeout_s", g.TimeoutSeconds)
	if err := a.gates.store.SetGateMessage(ctx, g.RunID, g.GateID, g.Nonce, msgID); err != nil {
		log.Warn("record the gate's prompt message", "err", err)
	}
	a.mu.Lock()
	a.msgID = msgID
	final, note := a.final, a.note
	a.mu.Unlock()
	if final != nil {
		a.gates.editPrompt(a.thread, withMessage(*final, msgID), note)
	}
}

// settled records how the posting ended and edits its prompt, now if it is
// posted, else as soon as it is. The channel is closed once the edit made
// now is done (at once when there is none to make now).
func (a *asker) settled(g Gate, note GateNote) <-chan struct{} {
	a.mu.Lock()
	a.final, a.note = &g, note
	msgID := a.msgID
	a.mu.Unlock()
	if msgID != "" {
		return a.gates.editPrompt(a.thread, withMessage(g, msgID), note)
	}
	return closedChan
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func withMessage(g Gate, msgID string) Gate {
	g.MessageTS = msgID
	return g
}

// wait blocks until the posting is settled.
func (a *asker) wait(ctx context.Context) (engine.Answer, error) {
	var timeout <-chan time.Time
	if sec := a.gate.TimeoutSeconds; sec > 0 {
		timer := time.NewTimer(time.Duration(sec * float64(time.Second)))
		defer timer.Stop()
		timeout = timer.C
	}
	for {
		select {
		case <-a.wake: // an answer here, a wake from the store, or the service's poll (checkStale)
		case <-timeout:
			return a.close(ctx, GateTimedOut, "")
		case <-ctx.Done():
			if errors.Is(context.Cause(ctx), ErrLeaseLost) {
				return engine.Answer{}, ctx.Err() // the replica that took the run over asks again
			}
			if _, err := a.close(context.WithoutCancel(ctx), GateWithdrawn, stoppedNote(ctx)); err != nil {
				a.gates.log.Error("withdraw the gate of a stopped run", "run", a.gate.RunID, "gate", a.gate.GateID, "err", err)
			}
			return engine.Answer{}, ctx.Err()
		}
		if ans, done, err := a.check(ctx); done || err != nil {
			return ans, err
		}
	}
}

// check re-reads the gate: answered (done) or still open.
func (a *asker) check(ctx context.Context) (engine.Answer, bool, error) {
	cur, err := a.gates.store.GetGate(ctx, a.gate.RunID, a.gate.GateID)
	switch {
	case err != nil:
		a.gates.log.Warn("read gate; trying again", "run", a.gate.RunID, "gate", a.gate.GateID, "err", err)
		return engine.Answer{}, false, nil
	case cur.Nonce != a.gate.Nonce:
		return engine.Answer{}, true, fmt.Errorf("gate %s was asked again elsewhere: %w", a.gate.GateID, ErrStaleGate)
	case cur.Status == GateOpen:
		return engine.Answer{}, false, nil
	}
	a.told(a.settled(cur, ""))
	return cur.EngineAnswer(), true, nil
}

// told waits (briefly) until the settled prompt's edit is done.
func (a *asker) told(done <-chan struct{}) {
	select {
	case <-done:
	case <-time.After(answerToldWait):
	}
}

// close ends the posting as timed_out or withdrawn — unless an answer won
// the race, which is then the result.
func (a *asker) close(ctx context.Context, state GateState, note GateNote) (engine.Answer, error) {
	closed, cur, err := a.gates.store.CloseGate(ctx, a.gate.RunID, a.gate.GateID, a.gate.Nonce, state)
	if err != nil {
		return engine.Answer{}, fmt.Errorf("close gate %s as %s: %w", a.gate.GateID, state, err)
	}
	if !closed && cur.Nonce == a.gate.Nonce && cur.Status == GateAnswered {
		a.told(a.settled(cur, ""))
		return cur.EngineAnswer(), nil
	}
	if state == GateTimedOut {
		a.gates.log.Info("gate timed out", "run", cur.RunID, "gate", cur.GateID, "timeout_s", cur.TimeoutSeconds)
	}
	a.settled(cur, note)
	return engine.Answer{Kind: engine.AnswerTimeout}, nil
}

// stoppedNote is why a withdrawn prompt's run stopped.
func stoppedNote(ctx context.Context) GateNote {
	if _, ok := cancellation(ctx); ok {
		return NoteCancelled
	}
	return NoteHostStopped
}

// editPrompt edits a settled gate's prompt in the background; the channel
// is closed once it is done.
func (gs *gates) editPrompt(t Thread, g Gate, note GateNote) <-chan struct{} {
	if g.MessageTS == "" {
		return closedChan
	}
	done := make(chan struct{})
	gs.bg.Go(func() {
		defer close(done)
		// Not bound to the runs' life: a prompt withdrawn because the host
		// stops is edited to say so before it does (Shutdown waits).
		ctx, cancel := context.WithTimeout(context.Background(), promptEditTimeout)
		defer cancel()
		if err := t.Settle(ctx, g, note); err != nil {
			gs.log.Warn("edit a settled gate's prompt", "run", g.RunID, "gate", g.GateID, "err", err)
		}
	})
	return done
}

// Answer answers a gate for who: the same call whatever the surface (a
// Slack button, a key typed at the console, the dashboard). The refusals
// are typed: ErrNoSuchGate, ErrStaleGate (an older posting's button),
// ErrNotAllowed (the endpoint's policy, or an answer from another chat),
// ErrInvalidAnswer (not one of the gate's choices), *SettledError (someone
// answered first, it timed out or was withdrawn). The answer itself is a
// compare-and-set in the store: of any number of concurrent answers, the
// first wins.
func (s *Service) Answer(ctx context.Context, a GateAnswer, who Principal) (Gate, error) {
	return s.gates.answer(ctx, a, who)
}

func (gs *gates) answer(ctx context.Context, a GateAnswer, who Principal) (Gate, error) {
	g, err := gs.store.GetGate(ctx, a.RunID, a.GateID)
	if err != nil {
		return Gate{}, err
	}
	log := gs.log.With("run", a.RunID, "gate", a.GateID, "by", who.String(), "choice", a.describe())
	if err := gs.checkAnswer(ctx, a, who, g); err != nil {
		log.Info("gate answer refused", "reason", err)
		return g, err
	}
	option, answer, _ := a.resolve(g.Question()) // checked by checkAnswer
	accepted, cur, err := gs.store.AnswerGate(ctx, g.RunID, g.GateID, g.Nonce, option, answer, who.User)
	switch {
	case err != nil:
		return g, fmt.Errorf("record the answer (try again): %w", err)
	case !accepted && cur.Nonce != g.Nonce:
		return cur, fmt.Errorf("gate %s: %w", g.GateID, ErrStaleGate)
	case !accepted:
		log.Info("gate answer refused", "reason", "lost the race")
		return cur, &SettledError{Gate: cur}
	}
	log.Info("gate answer accepted")
	gs.waiting.wake(cur.RunID, cur.GateID)
	return cur, nil
}

func (gs *gates) checkAnswer(ctx context.Context, a GateAnswer, who Principal, g Gate) error {
	switch {
	case a.Nonce != "" && a.Nonce != g.Nonce:
		return fmt.Errorf("gate %s: %w", g.GateID, ErrStaleGate)
	case g.Status != GateOpen:
		return &SettledError{Gate: g}
	}
	run, err := gs.store.GetRun(ctx, g.RunID)
	if err != nil {
		return err
	}
	if who.Chat != "" && who.Chat != run.ChatID {
		return fmt.Errorf("%w: that answer came from somewhere other than where the gate was asked", ErrNotAllowed)
	}
	option, _, err := a.resolve(g.Question())
	if err != nil {
		return err
	}
	p, err := gs.policies.of(who)
	if err != nil {
		return err
	}
	return notAllowed(p.MayAnswer(ctx, who, run, g, option))
}

// checkStale wakes the askers here whose gate was settled elsewhere (the
// service's poll: one query for all of them).
func (gs *gates) checkStale(ctx context.Context) {
	if gs.waiting.len() == 0 {
		return
	}
	open, err := gs.store.OpenGates(ctx)
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			gs.log.Warn("read the open gates; trying again", "err", err)
		}
		return
	}
	gs.waiting.stale(open)
}

// GateInThread is the open gate a plain reply in a run's thread is about:
// the one that takes text first, else the newest. ok is false when the
// thread has no open gate.
func (s *Service) GateInThread(ctx context.Context, chat, thread string) (Gate, bool, error) {
	return s.gates.inThread(ctx, chat, thread)
}

func (gs *gates) inThread(ctx context.Context, chat, thread string) (Gate, bool, error) {
	if thread == "" {
		return Gate{}, false, nil
	}
	open, err := gs.store.OpenGatesInChat(ctx, chat, thread)
	if err != nil || len(open) == 0 {
		return Gate{}, false, err
	}
	best := open[0]
	for _, g := range open[1:] {
		takes, bestTakes := g.Question().AcceptsText(), best.Question().AcceptsText()
		if takes && !bestTakes || takes == bestTakes && g.AskedAt.After(best.AskedAt) {
			best = g
		}
	}
	return best, true, nil
}

// OpenGates lists the open gates of a chat's runs, oldest first.
func (s *Service) OpenGates(ctx context.Context, chat string) ([]Gate, error) {
	return s.gates.store.OpenGatesInChat(ctx, chat, "")
}

var nonceEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// newNonce returns 50 random bits, plenty to make an old button useless.
func newNonce() string {
	var b [7]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return strings.ToLower(nonceEncoding.EncodeToString(b[:]))[:10]
}
