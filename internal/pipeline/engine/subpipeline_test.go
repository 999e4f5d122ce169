package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/frontend"
	"nanohost/internal/pipeline/script"
	"nanohost/internal/testkit"
)

// triageDOT is a library pipeline: it needs a topic, and its stage c
// returns a typed confidence.
const triageDOT = `digraph Triage {
	graph [goal="triage", inputs="topic"]
	start [shape=Mdiamond]
	exit [shape=Msquare]
	c [prompt="classify ${input.topic}", output_schema="{\"type\": \"object\", \"properties\": {\"confidence\": {\"type\": \"number\"}}, \"required\": [\"confidence\"]}"]
	start -> c -> exit
}`

const callerDOT = `digraph Caller {
	graph [goal="use the triage", inputs="topic"]
	start [shape=Mdiamond]
	exit [shape=Msquare]
	p [type="pipeline", pipeline="triage", inputs="topic=${input.topic}"]
	sure [prompt="act on ${p.c.confidence}"]
	unsure [prompt="ask a person"]
	handle [prompt="the triage failed: ${p.status}"]
	start -> p
	p -> handle [condition="outcome=fail"]
	p -> sure [condition="p.c.confidence >= 0.8"]
	p -> unsure
	sure -> exit
	unsure -> exit
	handle -> exit
}`

// library writes pipelines into a fresh directory and returns it.
func library(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestSubPipelineRunsAsAChildAndReturnsOutputs(t *testing.T) {
	dir := library(t, map[string]string{"triage.dot": triageDOT})
	be := &recordingBackend{inner: steps(map[string][]any{
		"c": {"looked at it\n```json\n{\"confidence\": 0.87}\n```\n[outcome:success]"},
	})}
	out := runGraph(t, callerDOT, runOpts{backend: be, file: filepath.Join(dir, "caller.dot"),
		front:     frontend.Options{PipelineDirs: []string{dir}},
		configure: func(c *engine.Config) { c.Inputs = map[string]string{"topic": "flaky tests"} }})
	wantStatus(t, out.res, "success")
	wantPath(t, out.res, "start", "p", "sure", "exit")

	// The child ran as a run of its own, with the input it was given.
	reqs := be.requests("c")
	if len(reqs) != 1 || reqs[0].RunID != "run-test.p-1" || !strings.Contains(reqs[0].Prompt, "classify flaky tests") {
		t.Fatalf("the child's stage got %+v", reqs)
	}
	childRoot := filepath.Join(out.root, "p", "child-1")
	if cp := loadCheckpoint(t, childRoot); cp.RunID != "run-test.p-1" || cp.State != engine.StateSuccess {
		t.Errorf("child journal: run %s, state %s", cp.RunID, cp.State)
	}
	// What the child's stages set comes back under the node's id, typed.
	cx := out.res.Context
	if cx["p.c.confidence"] != 0.87 || cx["p.run_id"] != "run-test.p-1" || cx["p.status"] != "success" {
		t.Errorf("parent context: p.c.confidence=%#v p.run_id=%v p.status=%v", cx["p.c.confidence"], cx["p.run_id"], cx["p.status"])
	}
	if _, leaked := cx["p.input.topic"]; leaked {
		t.Error("the child's inputs came back as if its stages had set them")
	}
	if sure := be.requests("sure"); len(sure) != 1 || !strings.Contains(sure[0].Prompt, "act on 0.87") {
		t.Errorf("the parent's next stage did not see the child's output: %+v", sure)
	}
	started := out.rec.ofType(engine.EventChildStarted)
	if len(started) != 1 || started[0].NodeID != "p" || started[0].Data[engine.DataChildRunID] != "run-test.p-1" {
		t.Errorf("ChildStarted events: %+v", started)
	}

	// The child's status is the node's outcome.
	be = &recordingBackend{inner: steps(map[string][]any{"c": {"[outcome:fail] [reason:no idea]"}})}
	out = runGraph(t, callerDOT, runOpts{backend: be, file: filepath.Join(dir, "caller.dot"),
		front:     frontend.Options{PipelineDirs: []string{dir}},
		configure: func(c *engine.Config) { c.Inputs = map[string]string{"topic": "x"} }})
	wantPath(t, out.res, "start", "p", "handle", "exit")
	if h := be.requests("handle"); len(h) != 1 || !strings.Contains(h[0].Prompt, "the triage failed: fail") {
		t.Errorf("a failed child: %+v", h)
	}
	var failed []string
	for _, e := range out.rec.ofType(engine.EventStageFailed) {
		failed = append(failed, e.NodeID+": "+e.Message)
	}
	if len(failed) != 1 || !strings.Contains(failed[0], "p: child run run-test.p-1 of triage.dot: c failed") {
		t.Errorf("StageFailed: %q", failed)
	}
}

func TestSubPipelineThroughAChildRunsSeam(t *testing.T) {
	dir := library(t, map[string]string{"triage.dot": triageDOT})
	var got engine.ChildRequest
	children := engine.ChildRunsFunc(func(ctx context.Context, req engine.ChildRequest) (*engine.RunResult, error) {
		got = req
		req.Started("pipeline-1-abcdef")
		return &engine.RunResult{RunID: "pipeline-1-abcdef", Status: engine.StateSuccess, Context: map[string]any{"c.confidence": 0.95, "graph.goal": "triage"}}, nil
	})
	out := runGraph(t, callerDOT, runOpts{file: filepath.Join(dir, "caller.dot"), front: frontend.Options{PipelineDirs: []string{dir}},
		configure: func(c *engine.Config) { c.Children, c.Inputs = children, map[string]string{"topic": "disk"} }})
	wantPath(t, out.res, "start", "p", "sure", "exit")
	if got.Parent != "run-test" || got.Node != "p" || got.Visit != 1 || got.Depth != 1 || got.Inputs["topic"] != "disk" ||
		got.Pipeline != filepath.Join(dir, "triage.dot") || got.Dynamic {
		t.Errorf("request = %+v", got)
	}
	if _, ok := out.res.Context["p.graph.goal"]; ok || out.res.Context["p.c.confidence"] != 0.95 {
		t.Errorf("context = %v", out.res.Context)
	}
}

func TestSubPipelinesNestNoDeeperThanTheBound(t *testing.T) {
	// A pipeline that runs itself through a name known only at run time:
	// lint cannot see the cycle, the depth bound stops it.
	self := `digraph Self {
		start [shape=Mdiamond]
		exit [shape=Msquare]
		again [type="pipeline", pipeline="${graph.me}"]
		start -> again -> exit
	}`
	self = strings.Replace(self, "digraph Self {", "digraph Self {\n graph [me=\"self\"]", 1)
	dir := library(t, map[string]string{"self.dot": self})
	out := runGraph(t, self, runOpts{file: filepath.Join(dir, "self.dot"), front: frontend.Options{PipelineDirs: []string{dir}}})
	wantStatus(t, out.res, "fail")
	wantReasonContains(t, out.res, "nest deeper than 8")
	depth := 0
	for root := filepath.Join(out.root, "again", "child-1"); ; root = filepath.Join(root, "again", "child-1") {
		if _, err := os.Stat(filepath.Join(root, engine.EventsFile)); err != nil {
			break
		}
		depth++
	}
	if depth != engine.MaxPipelineDepth {
		t.Errorf("%d nested runs, want %d", depth, engine.MaxPipelineDepth)
	}
}

func TestCancelParentCancelsChild(t *testing.T) {
	dir := library(t, map[string]string{"slow.dot": `digraph Slow {
		start [shape=Mdiamond]
		exit [shape=Msquare]
		long [prompt="take your time"]
		start -> long -> exit
	}`})
	parent := `digraph P {
		start [shape=Mdiamond]
		exit [shape=Msquare]
		p [type="pipeline", pipeline="slow"]
		start -> p -> exit
	}`
	be := &script.Script{Nodes: map[string][]script.Response{"long": {{Text: "[outcome:success]", DelayMS: 60_000}}}}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	done := make(chan runOut, 1)
	root := filepath.Join(t.TempDir(), "run")
	go func() {
		done <- runGraph(t, parent, runOpts{backend: be, ctx: ctx, file: filepath.Join(dir, "p.dot"), front: frontend.Options{PipelineDirs: []string{dir}},
			configure: func(c *engine.Config) { c.LogsRoot = root }})
	}()
	childRoot := filepath.Join(root, "p", "child-1")
	testkit.WaitUntil(t, 30*time.Second, "the child's slow stage starts", func() bool {
		return journalHas(childRoot, engine.EventStageStarted, "long")
	})
	start := time.Now()
	engine.Cancel(cancel, "alice")
	out := <-done
	if !out.res.Cancelled || out.res.CancelledBy != "alice" {
		t.Fatalf("parent: cancelled=%v by %q (%s)", out.res.Cancelled, out.res.CancelledBy, out.res.FailureReason)
	}
	if time.Since(start) > 20*time.Second {
		t.Error("the parent waited for the child's stage instead of cancelling it")
	}
	cp := loadCheckpoint(t, childRoot)
	if cp.State != engine.StateCancelled {
		t.Errorf("child state %s, want cancelled", cp.State)
	}
	lines, _ := readJournal(t, childRoot)
	last := lines[len(lines)-1]
	if last.Type != engine.EventPipelineCancelled || last.By != "alice" {
		t.Errorf("the child's journal ends with %s by %q, want PipelineCancelled by alice", last.Type, last.By)
	}
}

// journalHas reports whether the run in root has journalled an event of
// type typ for node.
func journalHas(root string, typ engine.EventType, node string) bool {
	data, err := os.ReadFile(filepath.Join(root, engine.EventsFile))
	if err != nil {
		return false
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if strings.Contains(line, `"type":"`+string(typ)+`"`) && strings.Contains(line, `"node_id":"`+node+`"`) {
			return true
		}
	}
	return false
}
