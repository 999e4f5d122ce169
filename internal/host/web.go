package host

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"

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

// webRuns lets the dashboard start, cancel and answer runs the way chat
// does: the same run manager, and the same gate desk — so a web answer is
// authorized, first-answer-wins and recorded like a button click in Slack.
type webRuns struct{ h *Host }

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
	if folder != "" {
		if g, ok := x.h.groups.get(folder); ok {
			return g, nil
		}
		return store.Group{}, fmt.Errorf("no group %q is registered (see groups in nanohost.yaml)", folder)
	}
	all := x.h.groups.all()
	sort.Slice(all, func(i, j int) bool { return all[i].Folder < all[j].Folder })
	for _, g := range all {
		if g.IsMain {
			return g, nil
		}
	}
	if len(all) == 1 {
		return all[0], nil
	}
	names := make([]string, len(all))
	for i, g := range all {
		names[i] = g.Folder
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
		if now, err := x.h.store.GetGate(ctx, req.RunID, req.GateID); err == nil && now.Status != store.GateOpen {
			return settledResult(now), nil // answered meanwhile
		}
		return web.AnswerResult{}, fmt.Errorf("gate %s is not being asked right now (is run %s running? an interrupted run asks again when it resumes): %w",
			req.GateID, req.RunID, web.ErrUnknownGate)
	}
	if problem := answerProblem(posting.Question, req); problem != "" {
		return web.AnswerResult{}, fmt.Errorf("%s: %w", problem, web.ErrInvalidAnswer)
	}
	ch, err := x.h.channelNamed(posting.Channel)
	if err != nil {
		return web.AnswerResult{}, err
	}
	wc := &webChannel{Channel: ch, preventSelf: x.h.cfg.Slack.Policy.PreventSelfApproval}
	x.h.desk.HandleAnswer(ctx, wc, channels.Inbound{
		Kind: channels.KindGateAnswer, Channel: ch.Name(), Chat: posting.Chat, User: req.By,
		Gate: &channels.GateAnswer{RunID: req.RunID, GateID: req.GateID, Nonce: posting.Nonce, Choice: req.Choice, Text: req.Text},
	})
	now, err := x.h.store.GetGate(ctx, req.RunID, req.GateID)
	if err != nil {
		return web.AnswerResult{}, err
	}
	refusal, denied := wc.outcome()
	switch {
	case refusal == "":
		return web.AnswerResult{Accepted: true, Status: string(now.Status), Answer: now.Answer, AnsweredBy: now.AnsweredBy}, nil
	case denied:
		return web.AnswerResult{}, fmt.Errorf("%s: %w", refusal, web.ErrNotAllowed)
	case now.Status != store.GateOpen:
		return settledResult(now), nil // lost the race
	}
	return web.AnswerResult{}, fmt.Errorf("%s: %w", refusal, web.ErrUnknownGate)
}

// answerProblem checks the answer against the question before the desk
// does, so the web can say 422 rather than a generic refusal.
func answerProblem(q engine.Question, req web.AnswerRequest) string {
	if req.Text != "" {
		if !channels.AcceptsText(q) {
			return "this gate takes one of its choices, not free text"
		}
		return ""
	}
	if _, ok := channels.FindOption(q, req.Choice); !ok {
		return fmt.Sprintf("%q is not one of this gate's choices", req.Choice)
	}
	return ""
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
