package runs_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runs"
	"nanohost/internal/store/storetest"
	"nanohost/internal/testkit"
)

const askingChildDOT = `digraph Checklist {
  graph [inputs="who"]
  start [shape=Mdiamond]
  exit  [shape=Msquare]
  ask   [shape=hexagon, label="Go on, ${input.who}?"]
  work  [prompt="work"]
  start -> ask
  ask -> work [label="[Y] Yes"]
  ask -> exit [label="[N] No"]
  work -> exit
}`

const callingParentDOT = `digraph Caller {
  start [shape=Mdiamond]
  exit  [shape=Msquare]
  check [type="pipeline", pipeline="checklist", inputs="who=ana"]
  after [prompt="after the checklist"]
  start -> check -> after -> exit
}`

// childFixture is a service whose pipelines may run checklist.dot.
func childFixture(t *testing.T) *fixture {
	t.Helper()
	lib := t.TempDir()
	if err := os.WriteFile(filepath.Join(lib, "checklist.dot"), []byte(askingChildDOT), 0o644); err != nil {
		t.Fatal(err)
	}
	url := storetest.URL(t, t.TempDir())
	st := openStore(t, url)
	service := newService(t, st, serviceOptions{poll: 50 * time.Millisecond, pipelineDirs: []string{lib}})
	return &fixture{t: t, st: st, url: url, service: service, pipelineDirs: []string{lib}}
}

// child waits for the child run of parent and returns it.
func (f *fixture) child(parent string) runs.Run {
	f.t.Helper()
	var child runs.Run
	testkit.WaitUntil(f.t, 10*time.Second, "the parent starts its child run", func() bool {
		page, err := f.service.List(context.Background(), runs.Filter{Parent: parent})
		if err != nil || len(page.Runs) == 0 {
			return false
		}
		child = page.Runs[0]
		return true
	})
	return child
}

// A sub-pipeline's child is a run of its own in the service: recorded with
// its parent and node, its own thread and events, its gate asked and
// answered like any gate; its end is the parent node's outcome.
func TestSubPipelineChildIsARunOfItsOwnWithItsGate(t *testing.T) {
	f := childFixture(t)
	ctx := context.Background()
	parent, _, err := f.service.Start(ctx, runs.StartRequest{Group: "main", Chat: "console", Source: []byte(callingParentDOT)}, chat)
	if err != nil {
		t.Fatal(err)
	}
	child := f.child(parent.ID)
	if child.ID == parent.ID || child.ParentNode != "check" || child.ChatID != parent.ChatID || child.GroupFolder != "main" {
		t.Errorf("child record: %+v", child)
	}
	g := f.gate(child.ID)
	if g.Text != "Go on, ana?" {
		t.Errorf("the child's gate asks %q", g.Text)
	}
	if _, err := f.service.Answer(ctx, runs.GateAnswer{RunID: child.ID, GateID: g.GateID, Option: 1}, chat); err != nil {
		t.Fatal(err)
	}
	f.waitState(child.ID, runs.Succeeded)
	f.waitState(parent.ID, runs.Succeeded)
	full, err := f.st.GetRun(ctx, child.ID)
	if err != nil || full.Parent != parent.ID || full.Inputs["who"] != "ana" {
		t.Errorf("child: %+v %v", full, err)
	}
	// The parent's events name the child; its context has what the child set.
	events, _ := f.st.Events(ctx, parent.ID, 0, 0)
	named := false
	for _, e := range events {
		named = named || (e.Type == engine.EventChildStarted && e.NodeID == "check" && e.Data[engine.DataChildRunID] == child.ID)
	}
	if !named {
		t.Error("no ChildStarted event in the parent names the child run")
	}
	cp, err := engine.LoadCheckpoint(parent.LogsRoot)
	if err != nil || cp.Context["check.human.gate.selected"] != "Y" || cp.Context["check.run_id"] != child.ID || cp.Context["check.status"] != "success" {
		t.Errorf("parent context: %v %v", cp.Context, err)
	}
	childEvents, _ := f.st.Events(ctx, child.ID, 0, 0)
	if len(childEvents) == 0 || childEvents[0].RunID != child.ID {
		t.Error("the child's events are not its own")
	}
}

// Cancelling the parent cancels its child, as cancelled by the same person;
// the child's open gate is withdrawn.
func TestCancelParentCancelsItsChildRun(t *testing.T) {
	f := childFixture(t)
	ctx := context.Background()
	parent, _, err := f.service.Start(ctx, runs.StartRequest{Group: "main", Chat: "console", Source: []byte(callingParentDOT)}, chat)
	if err != nil {
		t.Fatal(err)
	}
	child := f.child(parent.ID)
	g := f.gate(child.ID)
	if err := f.service.Cancel(ctx, parent.ID, web); err != nil {
		t.Fatal(err)
	}
	f.waitState(parent.ID, runs.Cancelled)
	c := f.waitState(child.ID, runs.Cancelled)
	if c.FailureReason != "cancelled by web:ana" {
		t.Errorf("the child ended %q", c.FailureReason)
	}
	if got, _ := f.st.GetGate(ctx, child.ID, g.GateID); got.Status != runs.GateWithdrawn {
		t.Errorf("the child's gate: %s", got.Status)
	}
}

// A host that stops while a child waits at its gate leaves both
// interrupted; the next one resumes the parent, which resumes the same
// child (not a second one), whose gate is asked again.
func TestRestartResumesTheChildThroughItsParent(t *testing.T) {
	f := childFixture(t)
	ctx := context.Background()
	parent, _, err := f.service.Start(ctx, runs.StartRequest{Group: "main", Chat: "console", Source: []byte(callingParentDOT)}, chat)
	if err != nil {
		t.Fatal(err)
	}
	child := f.child(parent.ID)
	f.gate(child.ID)
	f.service.Shutdown(10 * time.Second)
	for _, id := range []string{parent.ID, child.ID} {
		if r, _ := f.st.GetRun(ctx, id); r.Status != runs.Interrupted {
			t.Fatalf("run %s after the shutdown: %s", id, r.Status)
		}
	}

	f.service = newService(t, f.st, serviceOptions{poll: 50 * time.Millisecond, pipelineDirs: f.pipelineDirs})
	if err := f.service.ResumeUnfinished(ctx); err != nil {
		t.Fatal(err)
	}
	g := f.gate(child.ID)
	if _, err := f.service.Answer(ctx, runs.GateAnswer{RunID: child.ID, GateID: g.GateID, Option: 1}, chat); err != nil {
		t.Fatal(err)
	}
	f.waitState(parent.ID, runs.Succeeded)
	f.waitState(child.ID, runs.Succeeded)
	page, _ := f.service.List(ctx, runs.Filter{Parent: parent.ID})
	if len(page.Runs) != 1 {
		t.Errorf("the parent has %d child runs, want its one child resumed", len(page.Runs))
	}
	resumed := 0
	events, _ := f.st.Events(ctx, child.ID, 0, 0)
	for _, e := range events {
		if e.Type == engine.EventPipelineResumed {
			resumed++
		}
	}
	if resumed != 1 {
		t.Errorf("the child was resumed %d times, want 1", resumed)
	}
}

// A parent waiting for its child holds no run slot: with one slot for the
// whole host, parent and child still both run to their end.
func TestAParentWaitingForItsChildHoldsNoRunSlot(t *testing.T) {
	lib := t.TempDir()
	child := `digraph Plain { start [shape=Mdiamond] exit [shape=Msquare] work [prompt="work"] start -> work -> exit }`
	if err := os.WriteFile(filepath.Join(lib, "plain.dot"), []byte(child), 0o644); err != nil {
		t.Fatal(err)
	}
	url := storetest.URL(t, t.TempDir())
	st := openStore(t, url)
	f := &fixture{t: t, st: st, url: url, pipelineDirs: []string{lib},
		service: newService(t, st, serviceOptions{poll: 50 * time.Millisecond, pipelineDirs: []string{lib}, maxConcurrent: 1})}
	parentDOT := `digraph P { start [shape=Mdiamond] exit [shape=Msquare] sub [type="pipeline", pipeline="plain"] start -> sub -> exit }`
	parent, _, err := f.service.Start(context.Background(), runs.StartRequest{Group: "main", Chat: "console", Source: []byte(parentDOT)}, chat)
	if err != nil {
		t.Fatal(err)
	}
	f.waitState(parent.ID, runs.Succeeded)
	f.waitState(f.child(parent.ID).ID, runs.Succeeded)
}
