package web_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"nanohost/internal/channels"
	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/frontend"
	"nanohost/internal/pipeline/lint"
	"nanohost/internal/pipeline/script"
	"nanohost/internal/store"
	"nanohost/internal/web"
)

// engineRuns implements web.Runs the way the host does, with the real
// engine, a script backend and a real SQLite store: events are appended to
// the store (the source of truth the API reads), gates are recorded there
// and settled with the store's compare-and-set, run statuses follow.
type engineRuns struct {
	t       testing.TB
	st      *store.Store
	dir     string
	backend engine.Backend

	mu      sync.Mutex
	cancels map[string]context.CancelFunc
	waiters map[string]*gateWaiter // run/gate → waiting Ask
	subs    map[string]map[chan struct{}]bool
	wg      sync.WaitGroup
}

type gateWaiter struct {
	q      engine.Question
	answer chan engine.Answer
}

func newEngineRuns(t testing.TB, st *store.Store, backend engine.Backend) *engineRuns {
	r := &engineRuns{t: t, st: st, dir: t.TempDir(), backend: backend,
		cancels: map[string]context.CancelFunc{}, waiters: map[string]*gateWaiter{}, subs: map[string]map[chan struct{}]bool{}}
	t.Cleanup(func() {
		r.mu.Lock()
		for _, c := range r.cancels {
			c()
		}
		r.mu.Unlock()
		r.wg.Wait()
	})
	return r
}

func (r *engineRuns) Start(ctx context.Context, req web.StartRequest) (string, []pipeline.Diagnostic, error) {
	g, diags, err := frontend.Prepare("pipeline.dot", []byte(req.DOT), frontend.Options{})
	if err == nil {
		err = lint.Err(diags)
	}
	if err != nil {
		return "", diags, err
	}
	id := engine.NewRunID(time.Now())
	run := store.Run{ID: id, GroupFolder: "main", ChatID: "web:test", SourceDOT: req.DOT, FileName: "pipeline.dot",
		Goal: g.Goal(), Status: store.RunRunning, LogsRoot: filepath.Join(r.dir, id), StartedBy: req.By,
		Verbosity: nonEmpty(req.Verbosity, "standard")}
	if err := r.st.CreateRun(ctx, run); err != nil {
		return "", nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	r.mu.Lock()
	r.cancels[id] = cancel
	r.mu.Unlock()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.execute(runCtx, run, g)
	}()
	return id, diags, nil
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (r *engineRuns) execute(ctx context.Context, run store.Run, g *pipeline.Graph) {
	bg := context.Background()
	eng := engine.New(engine.Config{
		Backend: r.backend, Interviewer: engine.InterviewerFunc(r.ask),
		Observers: []engine.Observer{engine.ObserverFunc(r.record)},
		LogsRoot:  run.LogsRoot, RunID: run.ID, NoBackoff: true, NoFsync: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	res, err := eng.Run(ctx, g, []byte(run.SourceDOT), run.FileName)
	r.mu.Lock()
	delete(r.cancels, run.ID)
	r.mu.Unlock()
	switch {
	case err != nil:
		_ = r.st.FinishRun(bg, run.ID, store.RunFail, err.Error(), engine.Usage{})
	case res.Cancelled:
		_ = r.st.FinishRun(bg, run.ID, store.RunCancelled, "cancelled", res.Usage)
		_, _ = r.st.CancelOpenGates(bg, run.ID)
	case res.Status == "success":
		_ = r.st.FinishRun(bg, run.ID, store.RunSuccess, "", res.Usage)
	default:
		_ = r.st.FinishRun(bg, run.ID, store.RunFail, res.FailureReason, res.Usage)
	}
	r.notify(run.ID)
}

// record stores an event (the engine's seq is the log's seq for a run that
// is never resumed) and keeps the run's status in step, as the host does.
func (r *engineRuns) record(e engine.Event) {
	ctx := context.Background()
	if _, err := r.st.AppendEvent(ctx, e); err != nil {
		r.t.Errorf("append event %d of %s: %v", e.Seq, e.RunID, err)
	}
	switch e.Type {
	case engine.EventInterviewStarted:
		_ = r.st.UpdateRunStatus(ctx, e.RunID, store.RunWaiting)
	case engine.EventInterviewCompleted, engine.EventInterviewTimeout:
		_ = r.st.UpdateRunStatus(ctx, e.RunID, store.RunRunning)
	}
	r.notify(e.RunID)
}

func (r *engineRuns) ask(ctx context.Context, q engine.Question) (engine.Answer, error) {
	// Wait first, then record the gate: an answer may come as soon as
	// the gate is listed.
	w := &gateWaiter{q: q, answer: make(chan engine.Answer, 1)}
	key := q.RunID + "/" + q.ID
	r.mu.Lock()
	r.waiters[key] = w
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.waiters, key)
		r.mu.Unlock()
	}()
	if _, _, err := r.st.CreateGate(ctx, store.Gate{RunID: q.RunID, GateID: q.ID, NodeID: q.Stage, Question: q.Text, Choices: q.Options}); err != nil {
		return engine.Answer{}, err
	}
	select {
	case a := <-w.answer:
		return a, nil
	case <-ctx.Done():
		return engine.Answer{}, ctx.Err()
	}
}

func (r *engineRuns) Cancel(_ context.Context, runID, _ string) error {
	r.mu.Lock()
	cancel, ok := r.cancels[runID]
	r.mu.Unlock()
	if !ok {
		return fmt.Errorf("run %s is not running here", runID)
	}
	cancel()
	return nil
}

// Answer follows the host's rules where the API tests need them (the
// host's own authorization is tested through the real host): the choice
// must be one of the gate's; the store's compare-and-set picks the first
// answer.
func (r *engineRuns) Answer(ctx context.Context, req web.AnswerRequest) (web.AnswerResult, error) {
	g, err := r.st.GetGate(ctx, req.RunID, req.GateID)
	if errors.Is(err, store.ErrNotFound) {
		return web.AnswerResult{}, fmt.Errorf("gate %s of run %s: %w", req.GateID, req.RunID, web.ErrUnknownGate)
	}
	if err != nil {
		return web.AnswerResult{}, err
	}
	if g.Status != store.GateOpen {
		return settled(g), nil
	}
	r.mu.Lock()
	w := r.waiters[req.RunID+"/"+req.GateID]
	r.mu.Unlock()
	if w == nil {
		// The Ask ended after this request read the gate: an answer won
		// (the store says so before the Ask returns).
		if g, err = r.st.GetGate(ctx, req.RunID, req.GateID); err == nil && g.Status != store.GateOpen {
			return settled(g), nil
		}
		return web.AnswerResult{}, fmt.Errorf("gate %s is not being asked: %w", req.GateID, web.ErrUnknownGate)
	}
	ans := engine.Answer{Kind: engine.AnswerValue, Value: req.Choice, By: req.By}
	stored := req.Choice
	if req.Text != "" {
		if !channels.AcceptsText(w.q) {
			return web.AnswerResult{}, fmt.Errorf("this gate takes one of its choices, not free text: %w", web.ErrInvalidAnswer)
		}
		ans, stored = engine.Answer{Kind: engine.AnswerText, Text: req.Text, By: req.By}, req.Text
	} else if i, ok := optionIndex(w.q, req); ok {
		v := channels.ChoiceValueIn(w.q, i)
		ans.Value, stored = v, v
	} else {
		return web.AnswerResult{}, fmt.Errorf("%q is not one of this gate's choices: %w", req.Choice, web.ErrInvalidAnswer)
	}
	nonce := g.Nonce
	if req.Nonce != "" {
		nonce = req.Nonce
	}
	accepted, cur, err := r.st.AnswerGate(ctx, req.RunID, req.GateID, nonce, stored, req.By)
	if err != nil {
		return web.AnswerResult{}, err
	}
	if !accepted {
		res := settled(cur)
		if cur.Status == store.GateOpen {
			res.Message = "that answer is for an older posting of this gate; reload the questions"
		}
		return res, nil
	}
	w.answer <- ans
	return web.AnswerResult{Accepted: true, Status: string(cur.Status), Answer: cur.Answer, AnsweredBy: cur.AnsweredBy}, nil
}

// optionIndex is the option an answer names: by position, or by value.
func optionIndex(q engine.Question, req web.AnswerRequest) (int, bool) {
	if req.Option > 0 {
		return req.Option - 1, req.Option <= len(q.Options)
	}
	return channels.OptionIndex(q, req.Choice)
}

func settled(g store.Gate) web.AnswerResult {
	return web.AnswerResult{Status: string(g.Status), Answer: g.Answer, AnsweredBy: g.AnsweredBy,
		Message: fmt.Sprintf("gate %s was already %s%s", g.GateID, g.Status, byText(g.AnsweredBy))}
}

func byText(by string) string {
	if by == "" {
		return ""
	}
	return " by " + by
}

// Subscribe implements web.Notifier.
func (r *engineRuns) Subscribe(runID string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	r.mu.Lock()
	if r.subs[runID] == nil {
		r.subs[runID] = map[chan struct{}]bool{}
	}
	r.subs[runID][ch] = true
	r.mu.Unlock()
	return ch, func() {
		r.mu.Lock()
		delete(r.subs[runID], ch)
		r.mu.Unlock()
	}
}

func (r *engineRuns) notify(runID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for ch := range r.subs[runID] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// fixture is a server over a fresh store with the engine runner.
type fixture struct {
	t      testing.TB
	st     *store.Store
	runs   *engineRuns
	srv    *web.Server
	http   *httptest.Server
	base   string // the server's URL
	token  string
	script *script.Script
}

type fixtureOpts struct {
	token  string
	listen string
	script *script.Script
	noRuns bool
}

func newFixture(t testing.TB, o fixtureOpts) *fixture {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "nanohost.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if o.script == nil {
		o.script = &script.Script{}
	}
	f := &fixture{t: t, st: st, token: o.token, script: o.script}
	f.runs = newEngineRuns(t, st, o.script)
	var runs web.Runs = f.runs
	if o.noRuns {
		runs = nil
	}
	f.srv, err = web.New(web.Options{Store: st, Runs: runs, Listen: nonEmpty(o.listen, "127.0.0.1:0"), Token: o.token,
		PollInterval: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	f.http = httptest.NewServer(f.srv)
	f.base = f.http.URL
	t.Cleanup(f.http.Close)
	return f
}

// do sends a request with the bearer token (when the fixture has one).
func (f *fixture) do(method, path, body string, hdr ...string) *http.Response {
	f.t.Helper()
	req, err := http.NewRequest(method, f.base+path, strings.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if f.token != "" {
		req.Header.Set("Authorization", "Bearer "+f.token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1] // the client sends req.Host, not Header["Host"]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := noRedirect.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	return res
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// waitStatus polls the store until the run reaches one of the statuses.
func (f *fixture) waitStatus(id string, want ...store.RunStatus) store.Run {
	f.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		run, err := f.st.GetRun(context.Background(), id)
		if err != nil {
			f.t.Fatal(err)
		}
		for _, w := range want {
			if run.Status == w {
				return run
			}
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("run %s is %s after 20s, want %v", id, run.Status, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitGate polls until the run has an open gate and returns it.
func (f *fixture) waitGate(id string) store.Gate {
	f.t.Helper()
	return f.waitGateWhere(id, func(store.Gate) bool { return true })
}

// waitGateWhere polls until the run has an open gate for which ok holds.
func (f *fixture) waitGateWhere(id string, ok func(store.Gate) bool) store.Gate {
	f.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		gates, err := f.st.RunGates(context.Background(), id)
		if err != nil {
			f.t.Fatal(err)
		}
		for _, g := range gates {
			if g.Status == store.GateOpen && ok(g) {
				return g
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	f.t.Fatalf("run %s asked no (new) question within 20s", id)
	return store.Gate{}
}

// appendEvent stores a bare event of the given type for node "plan".
func appendEvent(t testing.TB, st *store.Store, runID string, seq int64, typ engine.EventType) {
	if _, err := st.AppendEvent(context.Background(), engine.Event{RunID: runID, Seq: seq, Time: time.Now(), Type: typ, NodeID: "plan", Label: "Plan"}); err != nil {
		t.Error(err)
	}
}

func engineUsage() engine.Usage {
	return engine.Usage{InputTokens: 1000, OutputTokens: 200, CostUSD: 0.12}
}
