package engine_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nanohost/internal/pipeline/engine"
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
