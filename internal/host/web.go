package host

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"nanohost/internal/channels"
	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/store"
	"nanohost/internal/web"
)

// withDashboard serves the dashboard and pipelines API (internal/web) next
// to the operations endpoints: /healthz and /metrics keep their bearer
// check, everything else goes to the dashboard, which does its own
// authentication (bearer token or login cookie, cross-site protection).
func (h *Host) withDashboard(ops http.Handler) http.Handler {
	dash, err := web.New(web.Options{
		Store: h.store, Runs: webRuns{h}, Listen: h.cfg.HTTP.Listen, Token: h.cfg.HTTP.Token.Reveal(), Logger: h.log,
		Stopping: h.isStopping,
	})
	if err != nil {
		h.log.Error("dashboard disabled", "err", err)
		return ops
	}
	mux := http.NewServeMux()
	mux.Handle("/healthz", ops)
	mux.Handle("/metrics", ops)
	mux.Handle("/", dash)
	return mux
}

// WebRuns is what the dashboard changes runs through (web.Runs), and what
// wakes its event streams (web.Notifier). The host serves it on http.listen
// itself; tests build a dashboard over it with their own web.Options.
func (h *Host) WebRuns() web.Runs { return webRuns{h} }

// webRuns lets the dashboard start, cancel and answer runs the way chat
// does: the same run manager, and the same gate desk — so a web answer is
// authorized, first-answer-wins and recorded like a button click in Slack.
type webRuns struct{ h *Host }

// Subscribe implements web.Notifier: the run's streams wake as soon as an
// event of it is stored, or it is marked finished, instead of at their
// next poll of the store.
func (x webRuns) Subscribe(runID string) (<-chan struct{}, func()) {
	return x.h.streams.subscribe(runID)
}

// streamWaker wakes the dashboard's event streams of a run. The zero value
// is ready to use.
type streamWaker struct {
	mu   sync.Mutex
	subs map[string]map[chan struct{}]struct{} // run id → its streams' channels
}

func (w *streamWaker) subscribe(runID string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1) // one pending wake is enough: a stream reads everything new
	w.mu.Lock()
	if w.subs == nil {
		w.subs = map[string]map[chan struct{}]struct{}{}
	}
	if w.subs[runID] == nil {
		w.subs[runID] = map[chan struct{}]struct{}{}
	}
	w.subs[runID][ch] = struct{}{}
	w.mu.Unlock()
	return ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.subs[runID], ch)
		if len(w.subs[runID]) == 0 {
			delete(w.subs, runID)
		}
	}
}

// wake tells the run's streams something new is stored (never blocks).
func (w *streamWaker) wake(runID string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ch := range w.subs[runID] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Start runs a pipeline in a group's workspace, reporting to its chat.
func (x webRuns) Start(ctx context.Context, req web.StartRequest) (string, []pipeline.Diagnostic, error) {
	g, err := x.group(req.Group)
	if err != nil {
		return "", nil, err
	}
	run, diags, err := x.h.runs.start(ctx, startSpec{
		Group: g.Folder, Chat: g.ChatID, User: req.By, File: "pipeline.dot",
		Source: []byte(req.DOT), Goal: req.Goal, Verbosity: req.Verbosity,
	})
	if err != nil {
		return "", diags, err
	}
	return run.ID, diags, nil
}

// group is the named group, or the main one, or the only one.
func (x webRuns) group(folder string) (store.Group, error) {
	all := x.h.groups.all()
	if len(all) == 0 {
		return store.Group{}, errors.New("no group is registered yet: add one under groups in nanohost.yaml, or register a chat as a group")
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Folder < all[j].Folder })
	names := make([]string, len(all))
	for i, g := range all {
		names[i] = g.Folder
	}
	if folder != "" {
		if g, ok := x.h.groups.get(folder); ok {
			return g, nil
		}
		return store.Group{}, fmt.Errorf("no group %q is registered (the groups are %s)", folder, strings.Join(names, ", "))
	}
	for _, g := range all {
		if g.IsMain {
			return g, nil
		}
	}
	if len(all) == 1 {
		return all[0], nil
	}
	return store.Group{}, fmt.Errorf("say which group to run in (group: one of %s), or mark one group main", strings.Join(names, ", "))
}

// Cancel stops a run like /pipeline cancel.
func (x webRuns) Cancel(ctx context.Context, runID, by string) error {
	x.h.log.Info("run cancel requested", "run", runID, "by", by)
	return x.h.runs.cancel(ctx, runID)
}

// Answer hands the answer to the gate desk as if it came from the chat
// that asked: the desk checks the posting, the choice and (through
// webChannel) the web's authorization, and settles first-answer-wins.
func (x webRuns) Answer(ctx context.Context, req web.AnswerRequest) (web.AnswerResult, error) {
	stored, err := x.h.store.GetGate(ctx, req.RunID, req.GateID)
	if errors.Is(err, store.ErrNotFound) {
		return web.AnswerResult{}, fmt.Errorf("run %s has no gate %s: %w", req.RunID, req.GateID, web.ErrUnknownGate)
	}
	if err != nil {
		return web.AnswerResult{}, err
	}
	if stored.Status != store.GateOpen {
		return settledResult(stored), nil
	}
	if req.Nonce != "" && req.Nonce != stored.Nonce {
		return web.AnswerResult{Status: string(stored.Status),
			Message: "that answer is for an older posting of this gate; reload the questions"}, nil
	}
	posting, ok := x.h.desk.Posting(req.RunID, req.GateID)
	if !ok {
		// No Ask waits on it: it was settled (and recorded) meanwhile, or
		// its run is not running here.
		if now, settled := x.settled(ctx, stored, 0); settled {
			return settledResult(now), nil
		}
		return web.AnswerResult{}, fmt.Errorf("gate %s is not being asked right now (is run %s running? an interrupted run asks again when it resumes): %w",
			req.GateID, req.RunID, web.ErrUnknownGate)
	}
	option, problem := answerOption(posting.Question, req)
	if problem != "" {
		return web.AnswerResult{}, fmt.Errorf("%s: %w", problem, web.ErrInvalidAnswer)
	}
	ch, err := x.h.channelNamed(posting.Channel)
	if err != nil {
		return web.AnswerResult{}, err
	}
	wc := &webChannel{Channel: ch, preventSelf: x.h.cfg.Slack.Policy.PreventSelfApproval}
	x.h.desk.HandleAnswer(ctx, wc, channels.Inbound{
		Kind: channels.KindGateAnswer, Channel: ch.Name(), Chat: posting.Chat, User: req.By,
		Gate: &channels.GateAnswer{RunID: req.RunID, GateID: req.GateID, Nonce: posting.Nonce, Option: option, Text: req.Text},
	})
	refusal, denied := wc.outcome()
	switch {
	case refusal == "":
		// The desk recorded the answer in the store before it returned.
		now, err := x.h.store.GetGate(ctx, req.RunID, req.GateID)
		if err != nil {
			return web.AnswerResult{}, err
		}
		return web.AnswerResult{Accepted: true, Status: string(now.Status), Answer: now.Answer, AnsweredBy: now.AnsweredBy}, nil
	case denied:
		return web.AnswerResult{}, fmt.Errorf("%s: %w", refusal, web.ErrNotAllowed)
	}
	if now, settled := x.settled(ctx, stored, storeCatchUp); settled {
		return settledResult(now), nil // lost the race
	}
	return web.AnswerResult{}, fmt.Errorf("%s: %w", refusal, web.ErrUnknownGate)
}

// storeCatchUp bounds how long a refused answer waits for the store to
// show the answer that beat it.
const storeCatchUp = 2 * time.Second

// settled reports how the gate asked as posting was settled, once the store
// says so (waiting up to wait). The desk settles a gate in memory first (that is what makes the
// first answer win) and records it in the store right after, so an answer
// that lost the race by a hair can find the gate still open in the store:
// it waits, briefly, for the winner to be recorded, rather than calling
// the gate unknown. A gate asked again meanwhile counts as not settled.
func (x webRuns) settled(ctx context.Context, posting store.Gate, wait time.Duration) (store.Gate, bool) {
	deadline := time.Now().Add(wait)
	for {
		now, err := x.h.store.GetGate(ctx, posting.RunID, posting.GateID)
		switch {
		case err != nil || now.Nonce != posting.Nonce:
			return now, false
		case now.Status != store.GateOpen:
			return now, true
		case time.Now().After(deadline) || ctx.Err() != nil:
			return now, false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// answerOption checks the answer against the question before the desk
// does, so the web can say 422 rather than a generic refusal, and turns a
// choice into the option's 1-based position: the desk is handed exactly the
// option that was picked. A key two options share ("Approve" and "Abort"
// both have A) names neither, so it is refused, as at the console.
func answerOption(q engine.Question, req web.AnswerRequest) (option int, problem string) {
	switch {
	case req.Text != "":
		if !channels.AcceptsText(q) {
			return 0, "this gate takes one of its choices, not free text"
		}
		return 0, ""
	case req.Option != 0:
		if req.Option < 1 || req.Option > len(q.Options) {
			return 0, fmt.Sprintf("option %d is not one of this gate's %d choices (they are numbered from 1)", req.Option, len(q.Options))
		}
		return req.Option, ""
	}
	i, ok := channels.OptionIndex(q, req.Choice)
	if !ok {
		return 0, fmt.Sprintf("%q is not one of this gate's choices", req.Choice)
	}
	if strings.EqualFold(strings.TrimSpace(req.Choice), q.Options[i].Key) && channels.KeyShared(q, q.Options[i].Key) {
		return 0, fmt.Sprintf("%q is the key of more than one choice (%s); answer with the choice's label or its option number", req.Choice, sharing(q, q.Options[i].Key))
	}
	return i + 1, ""
}

// sharing lists the labels of the options with accelerator key key.
func sharing(q engine.Question, key string) string {
	var labels []string
	for _, o := range q.Options {
		if strings.EqualFold(o.Key, key) {
			labels = append(labels, o.Label)
		}
	}
	return strings.Join(labels, ", ")
}

func settledResult(g store.Gate) web.AnswerResult {
	msg := fmt.Sprintf("gate %s was already %s", g.GateID, g.Status)
	if g.AnsweredBy != "" {
		msg += " by " + g.AnsweredBy
	}
	if g.Answer != "" {
		msg += ": " + g.Answer
	}
	return web.AnswerResult{Status: string(g.Status), Answer: g.Answer, AnsweredBy: g.AnsweredBy, Message: msg}
}

func (h *Host) channelNamed(name string) (channels.Channel, error) {
	for _, ch := range h.channels {
		if ch.Name() == name {
			return ch, nil
		}
	}
	return nil, fmt.Errorf("the gate was asked on channel %q, which this host does not run", name)
}

// webChannel stands for the chat that asked a gate while the web answers
// it: posts and edits go to that chat, authorization is the web's, and the
// desk's reply to the person (a refusal) is kept for the HTTP answer.
type webChannel struct {
	channels.Channel
	preventSelf bool

	mu      sync.Mutex
	refusal string
	denied  bool
}

// AuthorizeGateAnswer is the web's rule. The dashboard's users hold the
// host's token (or sit at its loopback): operators, who may answer a gate
// — unless the gate names its approvers (those are chat users the web
// cannot vouch for), or they started the run and self-approval is off.
func (c *webChannel) AuthorizeGateAnswer(_ context.Context, user string, g channels.GateRef) error {
	err := func() error {
		if strings.TrimSpace(g.Approvers) != "" {
			return fmt.Errorf("this gate names its approvers (%s); one of them has to answer it in the chat", g.Approvers)
		}
		if c.preventSelf && g.StartedBy != "" && g.StartedBy == user {
			return errors.New("you started this run, and self-approval is turned off (prevent_self_approval): someone else has to answer")
		}
		return nil
	}()
	if err != nil {
		c.mu.Lock()
		c.denied = true
		c.mu.Unlock()
	}
	return err
}

// Ephemeral keeps what the desk tells the person instead of posting it.
func (c *webChannel) Ephemeral(_ context.Context, _, _, text string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.refusal == "" {
		c.refusal = text
	}
	return nil
}

// UserName shows web users by their web name.
func (c *webChannel) UserName(ctx context.Context, user string) string {
	if strings.HasPrefix(user, "web:") {
		return user
	}
	if n, ok := c.Channel.(channels.UserNamer); ok {
		return n.UserName(ctx, user)
	}
	return user
}

func (c *webChannel) outcome() (refusal string, denied bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.refusal, c.denied
}
