package runs_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"nanohost/internal/channels/console"
	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/script"
	"nanohost/internal/runs"
	"nanohost/internal/runs/runstest"
	"nanohost/internal/store"
	"nanohost/internal/store/storetest"
	"nanohost/internal/testkit"
)

// The service on real parts: a SQLite store, the engine over the script
// backend, runs told on a console (into the void).

type fixture struct {
	t       *testing.T
	st      *store.Store
	url     string // where st is: a SQLite file, or PostgreSQL (NANOHOST_TEST_STORE=postgres)
	service *runs.Service
	// pipelineDirs are where its sub-pipelines are found.
	pipelineDirs []string
}

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

// web and chat are the principals of the tests: the dashboard's operator
// and a chat user (the console endpoint stands for any chat).
var (
	web  = runs.Principal{Endpoint: "web", User: "web:ana"}
	chat = runs.Principal{Endpoint: "console", User: "console", Chat: console.Chat}
)

func newFixture(t *testing.T, policies runs.Policies) *fixture {
	t.Helper()
	url := storetest.URL(t, t.TempDir())
	st := openStore(t, url)
	service := newService(t, st, serviceOptions{policies: policies, poll: 50 * time.Millisecond})
	return &fixture{t: t, st: st, url: url, service: service}
}

func openStore(t testing.TB, url string) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// serviceOptions are what tests vary in a service.
type serviceOptions struct {
	policies runs.Policies // nil: the web's operators and the console
	poll     time.Duration
	wakeups  runs.Wakeups
	observe  func(runs.Run, engine.Event)
	// replica, when set, makes the service one of several replicas
	// sharing st: runs are driven by their lease holder, for leaseTTL.
	replica  string
	leaseTTL time.Duration
	// runtime runs the nodes (nil: runstest.Sim, keeping no stage files).
	runtime runs.Runtime
	// maxConcurrent is Config.MaxConcurrent (0: the default).
	maxConcurrent int
	// pipelineDirs are where sub-pipelines are found by name.
	pipelineDirs []string
}

func newService(t testing.TB, st *store.Store, o serviceOptions) *runs.Service {
	t.Helper()
	cfg := runstest.Config(t, st)
	if o.policies != nil {
		cfg.Policies = o.policies
	}
	if o.runtime != nil {
		cfg.Runtime = o.runtime
	}
	if o.replica != "" {
		cfg.Leases, cfg.Journals = st, st
	}
	cfg.Load = runstest.Loader(o.pipelineDirs)
	cfg.GatePoll, cfg.Wakeups, cfg.Observe = o.poll, o.wakeups, o.observe
	cfg.Replica, cfg.LeaseTTL, cfg.MaxConcurrent = o.replica, o.leaseTTL, o.maxConcurrent
	return runstest.New(t, cfg)
}

var quiet = runstest.Quiet

// scriptRuntime runs every node on a script that answers success: a real
// (not simulated) backend, so stages keep their files.
type scriptRuntime struct{}

func (scriptRuntime) ForRun(context.Context, runs.Run) (runs.RunBackend, error) {
	return scriptRun{&script.Script{}}, nil
}

type scriptRun struct{ *script.Script }

func (scriptRun) Close() {}

const gateDOT = `digraph G {
  start  [shape=Mdiamond]
  review [shape=hexagon, label="Ship it?"]
  ship   [prompt="ship"]
  hold   [prompt="hold"]
  exit   [shape=Msquare]
  start -> review
  review -> ship [label="[A] Approve"]
  review -> hold [label="Abort"]
  ship -> exit
  hold -> exit
}`

// start starts dot as the chat user and waits for its first open gate.
func (f *fixture) start(dot string) (runs.Run, runs.Gate) {
	f.t.Helper()
	run, _, err := f.service.Start(context.Background(), runs.StartRequest{Group: "main", Chat: console.Chat, Source: []byte(dot)}, chat)
	if err != nil {
		f.t.Fatal(err)
	}
	return run, f.gate(run.ID)
}

func (f *fixture) gate(runID string) runs.Gate {
	f.t.Helper()
	var g runs.Gate
	testkit.WaitUntil(f.t, 10*time.Second, "run "+runID+" asks a gate", func() bool {
		st, err := f.service.Status(context.Background(), runID)
		if err != nil || len(st.Gates) == 0 {
			return false
		}
		g = st.Gates[0]
		return true
	})
	return g
}

func (f *fixture) waitState(runID string, want runs.State) runs.Run {
	f.t.Helper()
	var r runs.Run
	testkit.WaitUntil(f.t, 10*time.Second, fmt.Sprintf("run %s is %s", runID, want), func() bool {
		var err error
		r, err = f.st.GetRun(context.Background(), runID)
		return err == nil && r.Status == want
	})
	return r
}

// Every refusal of an answer is typed, so every surface can say why: no
// such gate, an older posting's nonce, not one of the gate's answers, not
// allowed by the endpoint's policy or from another chat, already settled.
func TestAnswerRefusalsAreTyped(t *testing.T) {
	f := newFixture(t, runs.Policies{
		"web": runs.Operators{PreventSelfApproval: true}, "console": console.Policy(),
	})
	ctx := context.Background()
	run, g := f.start(gateDOT)
	answer := func(a runs.GateAnswer, who runs.Principal) error {
		a.RunID = run.ID
		if a.GateID == "" {
			a.GateID = g.GateID
		}
		_, err := f.service.Answer(ctx, a, who)
		return err
	}
	for _, tc := range []struct {
		name string
		a    runs.GateAnswer
		who  runs.Principal
		want error
		text string
	}{
		{"no such gate", runs.GateAnswer{GateID: "nope-1", Option: 1}, chat, runs.ErrNoSuchGate, "nope-1"},
		{"stale posting", runs.GateAnswer{Nonce: "older", Option: 1}, chat, runs.ErrStaleGate, "older posting"},
		{"not a choice", runs.GateAnswer{Choice: "Z"}, chat, runs.ErrInvalidAnswer, `"Z" is not one of this gate's choices ([A] Approve, [A] Abort)`},
		{"no such option", runs.GateAnswer{Option: 3}, chat, runs.ErrInvalidAnswer, "option 3 is not one of this gate's 2 choices"},
		{"shared key", runs.GateAnswer{Choice: "a"}, chat, runs.ErrInvalidAnswer, `"a" is the key of more than one choice ([A] Approve, [A] Abort)`},
		{"text to buttons", runs.GateAnswer{Text: "sure"}, chat, runs.ErrInvalidAnswer, "not free text"},
		{"unknown endpoint", runs.GateAnswer{Option: 1}, runs.Principal{Endpoint: "irc", User: "x"}, runs.ErrNotAllowed, `"irc"`},
		{"another chat", runs.GateAnswer{Option: 1}, runs.Principal{Endpoint: "console", User: "console", Chat: "elsewhere"}, runs.ErrNotAllowed, "somewhere other than where the gate was asked"},
		{"another person at the console", runs.GateAnswer{Option: 1}, runs.Principal{Endpoint: "console", User: "intruder", Chat: console.Chat}, runs.ErrNotAllowed, "only the person at the console"},
		{"agents never answer", runs.GateAnswer{Option: 1}, runs.Principal{Endpoint: "ipc", User: "agent:main"}, runs.ErrNotAllowed, `"ipc"`},
	} {
		err := answer(tc.a, tc.who)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%s: %v; want %v saying %q", tc.name, err, tc.want, tc.text)
		}
	}
	if err := answer(runs.GateAnswer{Option: 2}, web); err != nil {
		t.Fatalf("a valid answer: %v", err)
	}
	err := answer(runs.GateAnswer{Option: 1}, chat)
	var settled *runs.SettledError
	if !errors.Is(err, runs.ErrSettled) || !errors.As(err, &settled) || settled.Gate.AnsweredBy != "web:ana" || settled.Gate.ChosenLabel() != "Abort" {
		t.Errorf("a second answer: %v; want it told the web answered Abort first", err)
	}
	if r := f.waitState(run.ID, runs.Succeeded); r.Status != runs.Succeeded {
		t.Fatal(r)
	}
	if nodes := f.nodes(run.ID); strings.Contains(nodes, "ship") || !strings.Contains(nodes, "hold") {
		t.Errorf("the run went %s; the answer was Abort (option 2, sharing no key with Approve)", nodes)
	}
}

func (f *fixture) nodes(runID string) string {
	events, _ := f.st.Events(context.Background(), runID, 0, 0)
	var out []string
	for _, e := range events {
		if e.Type == engine.EventStageStarted {
			out = append(out, e.NodeID)
		}
	}
	return strings.Join(out, ",")
}

// The dashboard's policy: a gate naming its approvers is theirs to answer
// in chat, and whoever started a run may not approve it when
// self-approval is off.
func TestOperatorsPolicy(t *testing.T) {
	f := newFixture(t, runs.Policies{"web": runs.Operators{PreventSelfApproval: true}, "console": console.Policy()})
	ctx := context.Background()
	run, _, err := f.service.Start(ctx, runs.StartRequest{Group: "main", Chat: console.Chat, Source: []byte(gateDOT)}, web)
	if err != nil {
		t.Fatal(err)
	}
	g := f.gate(run.ID)
	if _, err := f.service.Answer(ctx, runs.GateAnswer{RunID: run.ID, GateID: g.GateID, Option: 1}, web); !errors.Is(err, runs.ErrNotAllowed) ||
		!strings.Contains(err.Error(), "self-approval is turned off") {
		t.Errorf("the starter approving: %v", err)
	}
	named := strings.Replace(gateDOT, `label="Ship it?"`, `label="Ship it?", approvers="U1"`, 1)
	run2, g2 := f.start(named)
	if _, err := f.service.Answer(ctx, runs.GateAnswer{RunID: run2.ID, GateID: g2.GateID, Option: 1}, runs.Principal{Endpoint: "web", User: "web:bo"}); !errors.Is(err, runs.ErrNotAllowed) ||
		!strings.Contains(err.Error(), "names its approvers (U1)") {
		t.Errorf("the web answering a gate with named approvers: %v", err)
	}
}

// Any number of answers at once, from any surfaces: exactly one wins, in
// the store; every other is told who won; the run takes the winner.
func TestConcurrentAnswersOneWins(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	run, g := f.start(gateDOT)
	const n = 16
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		who := web
		if i%2 == 1 {
			who = chat
		}
		wg.Go(func() {
			_, errs[i] = f.service.Answer(ctx, runs.GateAnswer{RunID: run.ID, GateID: g.GateID, Option: 1 + i%2}, who)
		})
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, runs.ErrSettled):
			t.Errorf("a losing answer got %v, want ErrSettled", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d answers accepted, want exactly 1", won)
	}
	stored, _ := f.st.GetGate(ctx, run.ID, g.GateID)
	f.waitState(run.ID, runs.Succeeded)
	wantNode := map[int]string{1: "ship", 2: "hold"}[stored.Option]
	if !strings.Contains(f.nodes(run.ID), wantNode) {
		t.Errorf("the store says option %d won, the run went %s", stored.Option, f.nodes(run.ID))
	}
}

// An answer written to the store by another process (another replica, a
// tool) reaches the waiting gate: the store is the authority, memory only
// waits on it.
func TestAnAnswerWrittenElsewhereIsTaken(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	run, g := f.start(gateDOT)
	other, err := store.Open(ctx, f.url)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if ok, _, err := other.AnswerGate(ctx, run.ID, g.GateID, g.Nonce, 1, "A", "U7"); !ok || err != nil {
		t.Fatalf("answer in the other connection: %v %v", ok, err)
	}
	f.waitState(run.ID, runs.Succeeded)
	if !strings.Contains(f.nodes(run.ID), "ship") {
		t.Errorf("the run went %s, want ship", f.nodes(run.ID))
	}
}

// A gate that times out is closed as timed_out in the store; a run that
// is cancelled withdraws its open gates and ends cancelled, saying by whom.
func TestTimeoutAndCancelSettleTheGateInTheStore(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	timed := strings.Replace(gateDOT, `label="Ship it?"`, `label="Ship it?", timeout="100ms", human.default_choice="Abort"`, 1)
	run, g := f.start(timed)
	f.waitState(run.ID, runs.Succeeded)
	if got, _ := f.st.GetGate(ctx, run.ID, g.GateID); got.Status != runs.GateTimedOut {
		t.Errorf("gate after its timeout: %s", got.Status)
	}
	if _, err := f.service.Answer(ctx, runs.GateAnswer{RunID: run.ID, GateID: g.GateID, Option: 1}, chat); !errors.Is(err, runs.ErrSettled) ||
		!strings.Contains(err.Error(), "timed out") {
		t.Errorf("a late answer: %v", err)
	}

	run2, g2 := f.start(gateDOT)
	if err := f.service.Cancel(ctx, run2.ID, web); err != nil {
		t.Fatal(err)
	}
	r := f.waitState(run2.ID, runs.Cancelled)
	if r.FailureReason != "cancelled by web:ana" {
		t.Errorf("reason %q", r.FailureReason)
	}
	if got, _ := f.st.GetGate(ctx, run2.ID, g2.GateID); got.Status != runs.GateWithdrawn {
		t.Errorf("gate of a cancelled run: %s", got.Status)
	}
	events, _ := f.st.Events(ctx, run2.ID, 0, 0)
	last := events[len(events)-1]
	if last.Type != engine.EventPipelineCancelled || last.By != "web:ana" {
		t.Errorf("last event %s by %q; want PipelineCancelled by web:ana", last.Type, last.By)
	}
	if err := f.service.Cancel(ctx, run2.ID, web); !errors.Is(err, runs.ErrRunEnded) {
		t.Errorf("cancelling a cancelled run: %v", err)
	}
	if err := f.service.Resume(ctx, run2.ID, web); !errors.Is(err, runs.ErrRunEnded) || !strings.Contains(err.Error(), "cancelled") {
		t.Errorf("resuming a cancelled run: %v", err)
	}
}

// Starting checks the endpoint's policy and the pipeline; a refused start
// records nothing.
func TestStartRefusals(t *testing.T) {
	refuseAll := runs.PolicyFuncs{Control: func(context.Context, runs.Principal, string) error {
		return fmt.Errorf("you may not start runs here")
	}}
	f := newFixture(t, runs.Policies{"console": refuseAll})
	ctx := context.Background()
	_, _, err := f.service.Start(ctx, runs.StartRequest{Group: "main", Chat: console.Chat, Source: []byte(gateDOT)}, chat)
	if !errors.Is(err, runs.ErrNotAllowed) || !strings.Contains(err.Error(), "you may not start runs here") {
		t.Errorf("refused start: %v", err)
	}
	g := newFixture(t, nil)
	_, diags, err := g.service.Start(ctx, runs.StartRequest{Group: "main", Chat: console.Chat, Source: []byte(`digraph X { a -> b }`)}, chat)
	var invalid *runs.InvalidError
	if !errors.As(err, &invalid) || len(diags) == 0 || !pipeline.HasErrors(invalid.Diagnostics) {
		t.Errorf("invalid pipeline: %v %v", err, diags)
	}
	_, _, err = g.service.Start(ctx, runs.StartRequest{Group: "main", Chat: "C0NOWHERE", Source: []byte(gateDOT)}, runs.Principal{Endpoint: "web", User: "web:ana"})
	if err == nil || !strings.Contains(err.Error(), "no channel of this host serves chat") {
		t.Errorf("a chat nobody serves: %v", err)
	}
	for _, fx := range []*fixture{f, g} {
		if page, _ := fx.service.List(ctx, runs.Filter{}); len(page.Runs) != 0 {
			t.Errorf("refused starts recorded runs: %+v", page.Runs)
		}
	}
}

// A person types a run's short id, or the start of it, or of its whole
// id: Find takes any of them that only one run has, says which runs an
// ambiguous one matches, and never finds a run outside the filter.
func TestFindTakesAUniquePrefixOfTheIdOrShortID(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	for _, id := range []string{"pipeline-1700000000-3f9a1c", "pipeline-1700000001-3f0b2d", "pipeline-1700000002-77aa00"} {
		r := runs.Run{ID: id, GroupFolder: "main", ChatID: console.Chat, SourceDOT: "digraph{}", Status: runs.Succeeded, CreatedAt: time.Now()}
		if err := f.st.CreateRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.st.CreateRun(ctx, runs.Run{ID: "pipeline-1700000003-3f9d00", GroupFolder: "other", ChatID: "C2", SourceDOT: "digraph{}",
		Status: runs.Succeeded, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	mine := runs.Filter{Group: "main"}
	for ref, want := range map[string]string{
		"3f9a1c": "pipeline-1700000000-3f9a1c", "3F9A": "pipeline-1700000000-3f9a1c", "3f9": "pipeline-1700000000-3f9a1c",
		"77": "pipeline-1700000002-77aa00", "pipeline-1700000001": "pipeline-1700000001-3f0b2d",
		"pipeline-1700000002-77aa00": "pipeline-1700000002-77aa00",
	} {
		if r, err := f.service.Find(ctx, ref, mine); err != nil || r.ID != want {
			t.Errorf("Find(%q) = %q, %v; want %s", ref, r.ID, err, want)
		}
	}
	_, err := f.service.Find(ctx, "3f", mine)
	if !errors.Is(err, runs.ErrAmbiguousRun) || !strings.Contains(err.Error(), "3f9a1c") || !strings.Contains(err.Error(), "3f0b2d") {
		t.Errorf("Find(3f) = %v; want ambiguous, naming both runs", err)
	}
	for _, ref := range []string{"3f9d", "zz", "%", "_f9a1c", "", "pipeline-%"} {
		if r, err := f.service.Find(ctx, ref, mine); !errors.Is(err, runs.ErrNoSuchRun) {
			t.Errorf("Find(%q) = %q, %v; want no such run", ref, r.ID, err)
		}
	}
	if r, err := f.service.Find(ctx, "3f9d", runs.Filter{}); err != nil || r.GroupFolder != "other" {
		t.Errorf("Find(3f9d) over every group = %+v, %v", r, err)
	}
}

func TestShortID(t *testing.T) {
	for id, want := range map[string]string{
		"pipeline-1700000000-3f9a1c": "3f9a1c", "run-0001": "run-0001", "pipeline-": "pipeline-", "pipeline-17-": "pipeline-17-",
	} {
		if got := runs.ShortID(id); got != want {
			t.Errorf("ShortID(%q) = %q, want %q", id, got, want)
		}
	}
}

// A run whose engine reached its end while its host died before recording
// it (killed between the two) ends as what it reached when it is resumed —
// not failed for having nothing left to run.
func TestARunThatEndedUnrecordedEndsAsItReached(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	const dot = `digraph G { start [shape=Mdiamond]; work [prompt="w"]; exit [shape=Msquare]; start -> work -> exit }`
	done, _, err := f.service.Start(ctx, runs.StartRequest{Group: "main", Chat: console.Chat, Source: []byte(dot)}, chat)
	if err != nil {
		t.Fatal(err)
	}
	f.waitState(done.ID, runs.Succeeded)
	// The same end, unrecorded: the store says running, the run's
	// directory holds its finished checkpoint.
	lost := runs.Run{ID: "run-lost", GroupFolder: "main", ChatID: console.Chat, SourceDOT: dot, FileName: "pipeline.dot", LogsRoot: done.LogsRoot}
	if err := f.st.CreateRun(ctx, lost); err != nil {
		t.Fatal(err)
	}
	if err := f.st.UpdateRunStatus(ctx, lost.ID, runs.Running); err != nil {
		t.Fatal(err)
	}
	if err := f.service.ResumeUnfinished(ctx); err != nil {
		t.Fatal(err)
	}
	if got := f.waitState(lost.ID, runs.Succeeded); got.FailureReason != "" {
		t.Errorf("recorded with reason %q", got.FailureReason)
	}
}

// A run waiting at a gate holds no run slot: with one slot, three runs all
// reach their gates, and each, once answered, takes the slot again to finish.
func TestRunsWaitingAtGatesHoldNoRunSlot(t *testing.T) {
	st := openStore(t, storetest.URL(t, t.TempDir()))
	service := newService(t, st, serviceOptions{poll: 50 * time.Millisecond, maxConcurrent: 1})
	f := &fixture{t: t, st: st, service: service}
	var gates []runs.Gate
	for range 3 {
		_, g := f.start(gateDOT)
		gates = append(gates, g)
	}
	for _, g := range gates {
		if _, err := service.Answer(context.Background(), runs.GateAnswer{RunID: g.RunID, GateID: g.GateID, Nonce: g.Nonce, Option: 1}, chat); err != nil {
			t.Fatal(err)
		}
	}
	for _, g := range gates {
		f.waitState(g.RunID, runs.Succeeded)
	}
}
