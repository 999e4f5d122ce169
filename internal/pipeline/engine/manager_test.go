package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/frontend"
	"nanohost/internal/pipeline/script"
)

const childDOT = `digraph Child {
	graph [goal="child work"]
	start [shape=Mdiamond]
	exit [shape=Msquare]
	step1 [prompt="one"]
	step2 [prompt="two"]
	start -> step1 -> step2 -> exit
}`

func managerDOT(attrs string) string {
	return `digraph Parent {
		start [shape=Mdiamond]
		exit [shape=Msquare]
		supervise [shape=house, stack.child_dotfile="children/child.dot", manager.poll_interval="10ms", ` + attrs + `]
		after [prompt="after"]
		failed [prompt="handle"]
		start -> supervise
		supervise -> after [condition="outcome=success"]
		supervise -> failed [condition="outcome=fail"]
		after -> exit
		failed -> exit
	}`
}

// writeChild puts the child pipeline beside the parent file and returns the parent's path.
func writeChild(t *testing.T) string {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "children"), 0o755)
	if err := os.WriteFile(filepath.Join(dir, "children", "child.dot"), []byte(childDOT), 0o644); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "parent.dot")
}

func TestManagerLoopRunsTheChildPipelineToCompletion(t *testing.T) {
	be := &recordingBackend{inner: &script.Script{}}
	out := runGraph(t, managerDOT(""), runOpts{backend: be, file: writeChild(t)})
	wantStatus(t, out.res, "success")
	wantPath(t, out.res, "start", "supervise", "after", "exit")
	if len(be.requests("step1")) != 1 || len(be.requests("step2")) != 1 {
		t.Error("the child's stages did not run on the same backend")
	}
	ctx := out.res.Context
	if ctx["stack.child.status"] != "completed" || ctx["stack.child.outcome"] != "success" || ctx["stack.child.run_id"] != "run-test.supervise-1" {
		t.Errorf("context = %v", ctx)
	}
	childRoot := filepath.Join(out.root, "supervise", "child-1")
	if cp := loadCheckpoint(t, childRoot); cp.CurrentNode != "exit" || cp.State != engine.StateSuccess {
		t.Errorf("child checkpoint = %s/%s", cp.CurrentNode, cp.State)
	}
}

func TestManagerLoopReportsAFailedChild(t *testing.T) {
	be := steps(map[string][]any{"step2": {"[outcome:fail]"}})
	out := runGraph(t, managerDOT(""), runOpts{backend: be, file: writeChild(t)})
	wantPath(t, out.res, "start", "supervise", "failed", "exit")
	if out.res.Context["stack.child.status"] != "failed" || !strings.Contains(out.res.Context["stack.child.failure_reason"].(string), "step2 failed") {
		t.Errorf("context = %v", out.res.Context)
	}
}

func TestManagerLoopStopConditionAndMaxCycles(t *testing.T) {
	slow := func() *script.Script {
		return &script.Script{Nodes: map[string][]script.Response{
			"step1": {{Text: "[context:phase=built] [outcome:success]"}},
			"step2": {{Text: "[outcome:success]", DelayMS: 30_000}},
		}}
	}
	out := runGraph(t, managerDOT(`manager.stop_condition="context.phase=built"`), runOpts{backend: slow(), file: writeChild(t)})
	wantPath(t, out.res, "start", "supervise", "after", "exit")
	if out.res.Context["stack.child.status"] != "stopped" {
		t.Errorf("context = %v", out.res.Context)
	}

	out = runGraph(t, managerDOT(`manager.max_cycles=3`), runOpts{backend: slow(), file: writeChild(t)})
	wantPath(t, out.res, "start", "supervise", "failed", "exit")
	for _, e := range out.rec.ofType(engine.EventStageFailed) {
		if e.NodeID == "supervise" && !strings.Contains(e.Message, "manager.max_cycles (3)") {
			t.Errorf("failure = %q", e.Message)
		}
	}
}

func TestManagerLoopWithoutChildFileFails(t *testing.T) {
	src := strings.Replace(managerDOT(""), `stack.child_dotfile="children/child.dot", `, "", 1)
	out := runGraph(t, src, runOpts{})
	wantPath(t, out.res, "start", "supervise", "failed", "exit")
	var msg string
	for _, e := range out.rec.ofType(engine.EventStageFailed) {
		msg = e.Message
	}
	if !strings.Contains(msg, "no stack.child_dotfile") {
		t.Errorf("failure = %q", msg)
	}
}

func TestManagerSteersTheChild(t *testing.T) {
	steered := make(chan struct{})
	var once sync.Once
	be := &recordingBackend{inner: backendFunc(func(ctx context.Context, req engine.Request) (engine.Result, error) {
		switch req.NodeID {
		case "supervise":
			return engine.Result{Text: "Focus on the flaky login test first."}, nil
		case "step1":
			select { // the child's first stage lasts until the manager has steered
			case <-steered:
			case <-ctx.Done():
				return engine.Result{}, ctx.Err()
			}
		}
		return engine.Result{Text: "[outcome:success]"}, nil
	})}
	rec := observerFunc(func(e engine.Event) {
		if e.Type == engine.EventSteered && e.NodeID == "supervise" {
			once.Do(func() { close(steered) })
		}
	})
	src := strings.Replace(managerDOT(`manager.actions="observe,steer,wait", prompt="Keep the child on track"`), `stack.child_dotfile="children/child.dot"`, `pipeline="children/child.dot"`, 1)
	file := writeChild(t)
	out := runGraph(t, src, runOpts{backend: be, file: file, front: frontend.Options{PipelineDirs: []string{filepath.Dir(file)}},
		configure: func(c *engine.Config) { c.Observers = append(c.Observers, rec) }})
	wantPath(t, out.res, "start", "supervise", "after", "exit")

	// The manager's agent was asked with its prompt and the child's progress.
	asks := be.requests("supervise")
	if len(asks) == 0 || !strings.Contains(asks[0].Prompt, "Keep the child on track") || !strings.Contains(asks[0].Prompt, "run-test.supervise-1") {
		t.Fatalf("the manager's agent was asked %+v", asks)
	}
	// Its guidance reached the child's next stage prompt…
	step2 := be.requests("step2")
	if len(step2) != 1 || !strings.Contains(step2[0].Prompt, "Focus on the flaky login test first.") {
		t.Fatalf("step2's prompt: %+v", step2)
	}
	if step1 := be.requests("step1"); strings.Contains(step1[0].Prompt, "Focus on") {
		t.Error("the guidance reached a stage that had started before it was given")
	}
	// …and is recorded as an event on both sides.
	sent := out.rec.ofType(engine.EventSteered)
	if len(sent) == 0 || sent[0].NodeID != "supervise" || sent[0].Message != "Focus on the flaky login test first." || sent[0].Data[engine.DataChildRunID] != "run-test.supervise-1" {
		t.Errorf("parent's Steered events: %+v", sent)
	}
	childRoot := filepath.Join(out.root, "supervise", "child-1")
	if !journalHas(childRoot, engine.EventSteered, "step2") {
		t.Error("the child's journal does not record the guidance step2 received")
	}
}

func TestManagerWithoutSteerNeverAsksItsAgent(t *testing.T) {
	be := &recordingBackend{inner: &script.Script{}}
	out := runGraph(t, managerDOT(`manager.actions="observe,wait", prompt="Keep the child on track"`), runOpts{backend: be, file: writeChild(t)})
	wantStatus(t, out.res, "success")
	if n := len(be.requests("supervise")); n != 0 {
		t.Errorf("the manager's agent was asked %d times without steer", n)
	}
}

func TestManagerObservesAChildStartedElsewhere(t *testing.T) {
	file := writeChild(t)
	runs := t.TempDir()
	// The child is started on its own (another command, another process)…
	release := make(chan struct{})
	childBE := backendFunc(func(ctx context.Context, req engine.Request) (engine.Result, error) {
		if req.NodeID == "step2" {
			<-release
		}
		return engine.Result{Text: "[context:built=yes] [outcome:success]"}, nil
	})
	g, src := prepare(t, childDOT)
	childDone := make(chan *engine.RunResult, 1)
	go func() {
		res, _ := engine.New(engine.Config{Backend: childBE, LogsRoot: filepath.Join(runs, "child-7"), RunID: "child-7", NoFsync: true, Logger: quietLogger}).
			Run(context.Background(), g, src, filepath.Join(filepath.Dir(file), "children", "child.dot"))
		childDone <- res
	}()
	// …and the parent learns its run id from a stage, then observes it.
	parent := `digraph Parent {
		start [shape=Mdiamond]
		exit [shape=Msquare]
		learn [prompt="start the child elsewhere"]
		watch [shape=house, stack.child_autostart=false, manager.poll_interval="10ms"]
		start -> learn -> watch -> exit
	}`
	parentBE := backendFunc(func(ctx context.Context, req engine.Request) (engine.Result, error) {
		if req.NodeID == "learn" {
			return engine.Result{Text: "[context:stack.child.run_id=child-7] [outcome:success]"}, nil
		}
		t.Errorf("the observing manager ran %s", req.NodeID)
		return engine.Result{}, nil
	})
	done := make(chan runOut, 1)
	go func() {
		done <- runGraph(t, parent, runOpts{backend: parentBE, file: file, configure: func(c *engine.Config) { c.LogsRoot = filepath.Join(runs, "parent") }})
	}()
	select {
	case out := <-done:
		t.Fatalf("the manager finished before its child did: %+v", out.res)
	case <-time.After(100 * time.Millisecond): // it must still be watching
	}
	close(release)
	out := <-done
	wantPath(t, out.res, "start", "learn", "watch", "exit")
	if cx := out.res.Context; cx["stack.child.status"] != "completed" || cx["stack.child.run_id"] != "child-7" {
		t.Errorf("context = %v", cx)
	}
	if res := <-childDone; res.Status != engine.StateSuccess || res.RunID != "child-7" {
		t.Errorf("the child itself: %+v", res)
	}

	// Without a run id in the context there is nothing to observe.
	out = runGraph(t, parent, runOpts{file: file})
	wantStatus(t, out.res, "fail")
	wantReasonContains(t, out.res, "stack.child.run_id")
}

func TestManagerChildWorkdirStaysInTheWorkspace(t *testing.T) {
	be := &recordingBackend{inner: &script.Script{}}
	out := runGraph(t, managerDOT(`stack.child_workdir="services/api"`), runOpts{backend: be, file: writeChild(t)})
	wantStatus(t, out.res, "success")
	if reqs := be.requests("step1"); len(reqs) != 1 || reqs[0].Workdir != "services/api" {
		t.Errorf("the child's stage works in %+v", reqs)
	}
	if reqs := be.requests("after"); len(reqs) != 1 || reqs[0].Workdir != "" {
		t.Errorf("the manager's own run moved too: %+v", reqs)
	}
	// One that leaves the workspace is refused, by lint and at run time.
	_, diags, _ := frontend.Prepare("p.dot", []byte(managerDOT(`stack.child_workdir="../elsewhere"`)), frontend.Options{})
	if !hasRule(diags, "sub_pipeline", "leaves the workspace") {
		t.Errorf("lint: %v", diags)
	}
	if _, err := engine.ChildWorkdir("/etc"); err == nil {
		t.Error("an absolute workdir was taken")
	}
}

type observerFunc func(engine.Event)

func (f observerFunc) OnEvent(e engine.Event) { f(e) }

func hasRule(ds []pipeline.Diagnostic, rule, text string) bool {
	for _, d := range ds {
		if d.Rule == rule && d.Severity == pipeline.SeverityError && strings.Contains(d.Message, text) {
			return true
		}
	}
	return false
}
