package gate

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

	"nanohost/internal/channels"
	"nanohost/internal/pipeline/engine"
)

// editTimeout bounds how long a prompt edit may take once its gate is
// settled. The edit is cosmetic, so it never holds up the engine.
const editTimeout = 2 * time.Minute

// postTimeout bounds how long posting a prompt is retried (the channel
// retries rate limits and outages). The gate does not wait for it: it is
// open, can be answered elsewhere (the web dashboard) and times out
// meanwhile.
const postTimeout = 30 * time.Minute

// Desk runs the gates of every run: Ask (through Interviewer) posts a
// prompt and waits; HandleAnswer and HandleReply feed it the answers the
// channels deliver. Every decision is logged.
type Desk struct {
	book Book
	log  *slog.Logger
	now  func() time.Time

	mu      sync.Mutex
	waiting map[gateKey]*waiter
	edits   sync.WaitGroup
}

// waiter is an Ask blocked on one posting of a gate.
type waiter struct {
	gate Gate
	ch   channels.Channel
	// settled receives the gate once an answer wins.
	settled chan Gate
	links   func(ctx context.Context) []channels.Link
	// final is how the gate ended, once it has. The prompt is posted in
	// the background, so the settlement may come first: whichever of the
	// two happens last edits the prompt (see show and posted).
	final *ending
}

// ending is a settled gate and the note its prompt shows.
type ending struct {
	gate Gate
	note string
}

// NewDesk returns a Desk settling gates in book. logger may be nil.
func NewDesk(book Book, logger *slog.Logger) *Desk {
	if logger == nil {
		logger = slog.Default()
	}
	return &Desk{book: book, log: logger, now: time.Now, waiting: make(map[gateKey]*waiter)}
}

// ThreadPoster posts into a run's thread. report.Reporter implements it so
// a gate prompt lands after the thread messages queued before it.
type ThreadPoster interface {
	PostInThread(ctx context.Context, m channels.Message) (msgID string, err error)
	Thread(ctx context.Context) (threadID string, err error)
}

// Target says where a run's gates are asked.
type Target struct {
	Channel channels.Channel
	Chat    string
	// Thread posts the prompts; nil posts them at the top level of Chat.
	Thread ThreadPoster
	// StartedBy is who started the run (for prevent_self_approval).
	StartedBy string
	// Links, when set, gives links to show with each prompt, computed when
	// it is posted (the run's changes since it started).
	Links func(ctx context.Context) []channels.Link
}

// InThread is a ThreadPoster posting straight into a known thread.
func InThread(ch channels.Channel, chat, thread string) ThreadPoster {
	return fixedThread{ch, chat, thread}
}

type fixedThread struct {
	ch     channels.Channel
	chat   string
	thread string
}

func (f fixedThread) PostInThread(ctx context.Context, m channels.Message) (string, error) {
	return f.ch.Post(ctx, f.chat, f.thread, m)
}

func (f fixedThread) Thread(context.Context) (string, error) { return f.thread, nil }

// Interviewer returns the engine.Interviewer asking a run's gates at t.
func (d *Desk) Interviewer(t Target) engine.Interviewer {
	return engine.InterviewerFunc(func(ctx context.Context, q engine.Question) (engine.Answer, error) {
		return d.Ask(ctx, t, q)
	})
}

// Ask posts q at t and blocks until the first authorized answer, the
// question's timeout (then it returns engine.AnswerTimeout and the engine
// applies human.default_choice), or ctx's end (then ctx.Err()).
//
// The prompt is posted in the background: the gate is open (and its
// timeout runs) from the start, so a chat that is slow, rate-limited or
// down never holds up nor fails the run. A prompt that could not be posted
// is logged; the gate can still be answered on the web dashboard or time
// out.
func (d *Desk) Ask(ctx context.Context, t Target, q engine.Question) (engine.Answer, error) {
	if t.Thread == nil {
		t.Thread = InThread(t.Channel, t.Chat, "")
	}
	g := Gate{
		RunID: q.RunID, GateID: q.ID, Nonce: newNonce(),
		Channel: t.Channel.Name(), Chat: t.Chat,
		Question: q, StartedBy: t.StartedBy, OpenedAt: d.now(),
	}
	w := &waiter{gate: g, ch: t.Channel, settled: make(chan Gate, 1), links: t.Links}
	if err := d.open(ctx, w); err != nil {
		return engine.Answer{}, err
	}
	defer d.forget(w)
	d.edits.Go(func() { d.post(ctx, t.Thread, w) })
	return d.wait(ctx, w)
}

// post posts the prompt of w into the run's thread. It goes on even if the
// run stops meanwhile: a prompt that reached the chat but whose id we lost
// would show live buttons forever; once posted, a settled gate's prompt is
// edited at once.
func (d *Desk) post(ctx context.Context, thread ThreadPoster, w *waiter) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), postTimeout)
	defer cancel()
	g := d.gateOf(w)
	log := d.log.With("channel", g.Channel, "chat", g.Chat, "run", g.RunID, "gate", g.GateID)
	threadID, err := thread.Thread(ctx)
	if err != nil {
		log.Error("gate prompt not posted: the run's thread is missing; the gate stays open (web dashboard, timeout)", "err", err)
		return
	}
	d.mu.Lock()
	w.gate.Thread = threadID
	d.mu.Unlock()
	prompt := channels.GatePrompt{RunID: g.RunID, GateID: g.GateID, Nonce: g.Nonce, Question: g.Question}
	if w.links != nil {
		prompt.Links = w.links(ctx)
	}
	msgID, err := thread.PostInThread(ctx, channels.Message{Text: g.Question.Text, Gate: &prompt})
	if err != nil {
		log.Error("gate prompt not posted; the gate stays open (web dashboard, timeout)", "err", err)
		return
	}
	log.Info("gate opened", "msg", msgID, "timeout_s", g.Question.TimeoutSeconds)
	d.posted(ctx, w, msgID)
}

// posted records the prompt's message id, and edits the prompt at once if
// the gate was settled while it was being posted.
func (d *Desk) posted(ctx context.Context, w *waiter, msgID string) {
	d.mu.Lock()
	w.gate.MsgID = msgID
	final := w.final
	g := w.gate
	d.mu.Unlock()
	if err := d.book.SetMessage(ctx, g.RunID, g.GateID, g.Nonce, msgID); err != nil {
		d.log.Warn("gate: record prompt message", "run", g.RunID, "gate", g.GateID, "err", err)
	}
	if final != nil {
		d.showAsync(ctx, w.ch, final.gate.withMessage(msgID), final.note)
	}
}

// show edits w's prompt to the settled gate g, now if it is posted, else
// as soon as it is (posted).
func (d *Desk) show(ctx context.Context, w *waiter, g Gate, note string) {
	d.mu.Lock()
	w.final = &ending{gate: g, note: note}
	msgID := w.gate.MsgID
	d.mu.Unlock()
	if msgID != "" {
		d.showAsync(ctx, w.ch, g.withMessage(msgID), note)
	}
}

func (g Gate) withMessage(msgID string) Gate {
	g.MsgID = msgID
	return g
}

func (d *Desk) open(ctx context.Context, w *waiter) error {
	replaced, err := d.book.Open(ctx, w.gate)
	if err != nil {
		return fmt.Errorf("ask gate %s of run %s: %w", w.gate.GateID, w.gate.RunID, err)
	}
	d.mu.Lock()
	old := d.waiting[gateKey{w.gate.RunID, w.gate.GateID}]
	d.waiting[gateKey{w.gate.RunID, w.gate.GateID}] = w
	d.mu.Unlock()
	if replaced != nil && replaced.MsgID != "" && (old == nil || old.gate.Nonce != replaced.Nonce) {
		// An earlier posting (before a host restart) is still showing
		// buttons: take them away so nobody clicks a dead prompt.
		stale := *replaced
		stale.State, stale.AnsweredAt = StateWithdrawn, d.now()
		d.showAsync(ctx, w.ch, stale, "Superseded by a newer prompt below.")
	}
	return nil
}

func (d *Desk) forget(w *waiter) {
	d.mu.Lock()
	defer d.mu.Unlock()
	k := gateKey{w.gate.RunID, w.gate.GateID}
	if d.waiting[k] == w {
		delete(d.waiting, k)
	}
}

func (d *Desk) wait(ctx context.Context, w *waiter) (engine.Answer, error) {
	var timeout <-chan time.Time
	if s := w.gate.Question.TimeoutSeconds; s > 0 {
		timer := time.NewTimer(time.Duration(s * float64(time.Second)))
		defer timer.Stop()
		timeout = timer.C
	}
	select {
	case g := <-w.settled:
		d.show(ctx, w, g, "")
		return answerOf(g), nil
	case <-timeout:
		accepted, cur := d.settle(ctx, d.gateOf(w), Resolution{State: StateTimedOut, At: d.now()})
		if !accepted && cur.State == StateAnswered {
			<-w.settled // the answer won the race; it was handed over too
			d.show(ctx, w, cur, "")
			return answerOf(cur), nil
		}
		d.log.Info("gate timed out", "run", cur.RunID, "gate", cur.GateID, "timeout_s", cur.Question.TimeoutSeconds)
		d.show(ctx, w, cur, "")
		return engine.Answer{Kind: engine.AnswerTimeout}, nil
	case <-ctx.Done():
		bg := context.WithoutCancel(ctx)
		accepted, cur := d.settle(bg, d.gateOf(w), Resolution{State: StateWithdrawn, At: d.now()})
		switch {
		case accepted:
			d.show(bg, w, cur, "The run stopped before anyone answered.")
		case cur.State == StateAnswered: // answered just as the run stopped
			d.show(bg, w, cur, "")
		}
		return engine.Answer{}, ctx.Err()
	}
}

func (d *Desk) gateOf(w *waiter) Gate {
	d.mu.Lock()
	defer d.mu.Unlock()
	return w.gate
}

// settle resolves g in the book; it reports whether this resolution won and
// the gate as it now stands (with the message id this process knows).
func (d *Desk) settle(ctx context.Context, g Gate, r Resolution) (bool, Gate) {
	accepted, cur, err := d.book.Resolve(ctx, g.RunID, g.GateID, g.Nonce, r)
	if err != nil {
		d.log.Warn("gate: settle", "run", g.RunID, "gate", g.GateID, "state", r.State, "err", err)
		return false, g
	}
	if cur.MsgID == "" {
		cur.MsgID = g.MsgID
	}
	return accepted, cur
}

// answerOf turns a settled gate into the engine's answer.
func answerOf(g Gate) engine.Answer {
	switch {
	case g.State == StateTimedOut:
		return engine.Answer{Kind: engine.AnswerTimeout}
	case g.Text != "":
		return engine.Answer{Kind: engine.AnswerText, Text: g.Text, By: g.AnsweredBy}
	}
	return engine.Answer{Kind: engine.AnswerValue, Value: g.Choice, By: g.AnsweredBy}
}

// HandleAnswer settles a gate with a gate_answer the channel ch delivered
// (a button click, a key typed at the console). Every refusal is told to
// the user ephemerally and logged.
func (d *Desk) HandleAnswer(ctx context.Context, ch channels.Channel, in channels.Inbound) {
	if in.Gate == nil {
		return
	}
	a := *in.Gate
	g, err := d.book.Get(ctx, a.RunID, a.GateID)
	choice := a.Choice
	if i, ok := chosenOption(g.Question, a); err == nil && ok {
		choice = channels.ChoiceValueIn(g.Question, i)
	} else if choice == "" {
		choice = choiceText(a)
	}
	log := d.log.With("channel", ch.Name(), "chat", in.Chat, "user", in.User, "run", a.RunID, "gate", a.GateID, "choice", choice)
	if err != nil {
		d.refuse(ctx, ch, in, log, "unknown gate", "That prompt is no longer active.")
		return
	}
	if g.Nonce != a.Nonce {
		d.refuse(ctx, ch, in, log, "stale prompt", "That button belongs to an older prompt for this gate; it no longer answers anything. Use the latest prompt in the thread.")
		return
	}
	if g.Channel != ch.Name() || g.Chat != in.Chat {
		d.refuse(ctx, ch, in, log, "answer from another chat", "That answer came from somewhere other than where the gate was asked.")
		return
	}
	if g.State != StateOpen {
		d.refuse(ctx, ch, in, log, "already settled", d.settledText(ctx, ch, g))
		return
	}
	r, problem := resolutionFor(g.Question, a, in.User, d.now())
	if problem != "" {
		d.refuse(ctx, ch, in, log, "invalid choice", problem)
		return
	}
	d.decide(ctx, ch, in, log, g, r)
}

// HandleReply treats a plain message in a run thread as the free-text answer
// to the thread's open freeform gate, if there is one (that is the only
// case a plain message answers anything: it is never an approval). It
// reports whether the message was consumed.
func (d *Desk) HandleReply(ctx context.Context, ch channels.Channel, in channels.Inbound) bool {
	if in.Thread == "" || strings.TrimSpace(in.Text) == "" {
		return false
	}
	g, ok := d.openInThread(ch.Name(), in.Chat, in.Thread)
	if !ok {
		return false
	}
	log := d.log.With("channel", ch.Name(), "chat", in.Chat, "user", in.User, "run", g.RunID, "gate", g.GateID, "choice", "(text)")
	if !channels.AcceptsText(g.Question) {
		if _, isChoice := channels.FindOption(g.Question, strings.TrimSpace(in.Text)); isChoice {
			d.refuse(ctx, ch, in, log, "thread reply is not an approval", "A reply in the thread does not answer this gate; use its buttons.")
		}
		return false
	}
	a := channels.GateAnswer{RunID: g.RunID, GateID: g.GateID, Nonce: g.Nonce, Text: strings.TrimSpace(in.Text)}
	r, problem := resolutionFor(g.Question, a, in.User, d.now())
	if problem != "" {
		d.refuse(ctx, ch, in, log, "invalid answer", problem)
		return true
	}
	d.decide(ctx, ch, in, log, g, r)
	return true
}

// decide authorizes and then settles g with r, first answer wins.
func (d *Desk) decide(ctx context.Context, ch channels.Channel, in channels.Inbound, log *slog.Logger, g Gate, r Resolution) {
	if err := authorize(ctx, ch, in.User, g, r.Choice); err != nil {
		d.refuse(ctx, ch, in, log, "not authorized", err.Error())
		return
	}
	accepted, cur, err := d.book.Resolve(ctx, g.RunID, g.GateID, g.Nonce, r)
	switch {
	case errors.Is(err, ErrStaleNonce):
		d.refuse(ctx, ch, in, log, "stale prompt", "That prompt was replaced by a newer one; use the latest prompt in the thread.")
		return
	case err != nil:
		log.Error("gate: record answer", "err", err)
		d.tell(ctx, ch, in, "Your answer could not be recorded; please try again.")
		return
	case !accepted:
		d.refuse(ctx, ch, in, log, "lost the race", d.settledText(ctx, ch, cur))
		return
	}
	log.Info("gate answer accepted", "decision", "accepted", "text", r.Text != "")
	d.handOver(ctx, ch, cur)
}

// handOver gives a settled gate to its waiting Ask, or (when no Ask waits
// in this process, e.g. after a restart) edits the prompt itself.
func (d *Desk) handOver(ctx context.Context, ch channels.Channel, g Gate) {
	d.mu.Lock()
	w := d.waiting[gateKey{g.RunID, g.GateID}]
	d.mu.Unlock()
	if w != nil && w.gate.Nonce == g.Nonce {
		w.settled <- g // buffered: exactly one resolution wins
		return
	}
	d.showAsync(ctx, ch, g, "")
}

func (d *Desk) openInThread(channel, chat, thread string) (Gate, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var best Gate
	found := false
	for _, w := range d.waiting {
		g := w.gate
		if g.Channel != channel || g.Chat != chat || g.Thread != thread {
			continue
		}
		// Prefer a gate that takes text, then the newest.
		better := !found ||
			channels.AcceptsText(g.Question) && !channels.AcceptsText(best.Question) ||
			channels.AcceptsText(g.Question) == channels.AcceptsText(best.Question) && g.OpenedAt.After(best.OpenedAt)
		if better {
			best, found = g, true
		}
	}
	return best, found
}

// resolutionFor checks an answer against the question; problem is set
// (and shown to the user) when it does not fit. The resolution's Choice
// names the chosen option alone (ChoiceValueIn), so the engine takes the
// very option that was picked even when two share an accelerator key.
func resolutionFor(q engine.Question, a channels.GateAnswer, user string, at time.Time) (r Resolution, problem string) {
	r = Resolution{State: StateAnswered, By: user, At: at}
	if a.Text != "" && a.Choice == "" && a.Option == 0 {
		if !channels.AcceptsText(q) {
			return r, "This gate takes one of its choices, not free text."
		}
		r.Text = a.Text
		for i, o := range q.Options {
			if o.Freeform {
				r.Choice = channels.ChoiceValueIn(q, i)
				break
			}
		}
		return r, ""
	}
	i, ok := chosenOption(q, a)
	if !ok {
		return r, fmt.Sprintf("%s is not one of this gate's choices.", choiceText(a))
	}
	r.Choice = channels.ChoiceValueIn(q, i)
	return r, ""
}

// chosenOption is the position of the option a names: by position (a
// button) or by value (a typed key or label).
func chosenOption(q engine.Question, a channels.GateAnswer) (int, bool) {
	if a.Option > 0 {
		return a.Option - 1, a.Option <= len(q.Options)
	}
	return channels.OptionIndex(q, a.Choice)
}

// choiceText describes an answer's choice for logs and refusals.
func choiceText(a channels.GateAnswer) string {
	if a.Option > 0 {
		return fmt.Sprintf("choice #%d", a.Option)
	}
	return fmt.Sprintf("%q", a.Choice)
}

func authorize(ctx context.Context, ch channels.Channel, user string, g Gate, choice string) error {
	az, ok := ch.(channels.GateAuthorizer)
	if !ok {
		return fmt.Errorf("gates cannot be answered through %s", ch.Name())
	}
	return az.AuthorizeGateAnswer(ctx, user, channels.GateRef{
		RunID: g.RunID, GateID: g.GateID, Chat: g.Chat,
		Approvers: g.Question.Approvers, StartedBy: g.StartedBy, Choice: choice,
	})
}

func (d *Desk) refuse(ctx context.Context, ch channels.Channel, in channels.Inbound, log *slog.Logger, reason, text string) {
	log.Info("gate answer refused", "decision", "refused", "reason", reason)
	d.tell(ctx, ch, in, text)
}

func (d *Desk) tell(ctx context.Context, ch channels.Channel, in channels.Inbound, text string) {
	if err := channels.Tell(ctx, ch, in.Chat, in.Thread, in.User, text); err != nil {
		d.log.Warn("gate: ephemeral reply", "user", in.User, "err", err)
	}
}

// settledText says how a gate was settled: "Already answered by Ana: Approve (14:03 UTC)."
func (d *Desk) settledText(ctx context.Context, ch channels.Channel, g Gate) string {
	switch g.State {
	case StateTimedOut:
		return "This gate already timed out."
	case StateWithdrawn:
		return "That prompt is no longer active."
	}
	what := g.Choice
	if o, ok := channels.FindOption(g.Question, g.Choice); ok {
		what = o.Label
	}
	if g.Text != "" {
		what = fmt.Sprintf("%q", g.Text)
	}
	return fmt.Sprintf("Already answered by %s: %s (%s).", userName(ctx, ch, g.AnsweredBy), what, g.AnsweredAt.UTC().Format("15:04 UTC"))
}

func userName(ctx context.Context, ch channels.Channel, user string) string {
	if n, ok := ch.(channels.UserNamer); ok {
		if name := n.UserName(ctx, user); name != "" {
			return name
		}
	}
	return user
}

// showAsync edits a settled gate's prompt (who chose what and when, or that
// it timed out), buttons removed. It runs in the background: the edit is
// for people, the engine need not wait for it. Wait waits for these edits.
func (d *Desk) showAsync(ctx context.Context, ch channels.Channel, g Gate, note string) {
	if g.MsgID == "" {
		return
	}
	res := resolutionMessage(g, note)
	d.edits.Add(1)
	go func() {
		defer d.edits.Done()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), editTimeout)
		defer cancel()
		if err := ch.Update(ctx, g.Chat, g.MsgID, res); err != nil {
			d.log.Warn("gate: edit prompt", "run", g.RunID, "gate", g.GateID, "msg", g.MsgID, "err", err)
		}
	}()
}

// Wait blocks until the prompt posts and edits started so far are done
// (for tests and for an orderly host shutdown). A post waiting for a chat
// that is down ends when its ThreadPoster gives up (a run's reporter stops).
func (d *Desk) Wait() { d.edits.Wait() }

func resolutionMessage(g Gate, note string) channels.Message {
	res := channels.GateResolution{
		Prompt: channels.GatePrompt{RunID: g.RunID, GateID: g.GateID, Nonce: g.Nonce, Question: g.Question},
		By:     g.AnsweredBy, Text: g.Text, At: g.AnsweredAt, Note: note,
	}
	switch g.State {
	case StateAnswered:
		res.Outcome = channels.GateAnswered
		res.Choice = g.Choice
		if o, ok := channels.FindOption(g.Question, g.Choice); ok {
			res.Choice = o.Label
		}
	case StateTimedOut:
		res.Outcome = channels.GateTimedOut
		if res.Note == "" {
			res.Note = "Nobody answered in time; the pipeline continues with its default choice."
		}
	default:
		res.Outcome = channels.GateWithdrawn
		if res.Note == "" {
			res.Note = "This prompt is no longer active."
		}
	}
	return channels.Message{Text: channels.ResolutionText(res), Resolved: &res}
}

var nonceEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// newNonce returns 50 random bits, plenty to make an old button useless.
func newNonce() string {
	var b [7]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return strings.ToLower(nonceEncoding.EncodeToString(b[:]))[:10]
}
