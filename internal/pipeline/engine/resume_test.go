package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/fidelity"
	"nanohost/internal/pipeline/interview"
	"nanohost/internal/pipeline/script"
)

// A pipeline with a loop, a human gate, a diamond and context flowing
// between nodes: what resume has to get right.
const resumeDOT = `digraph Resume {
	graph [goal="ship the feature"]
	start [shape=Mdiamond]
	exit [shape=Msquare]
	plan [prompt="plan $goal"]
	implement [prompt="implement", goal_gate=true, retry_target="plan"]
	test [prompt="test"]
	gate [shape=diamond]
	review [shape=hexagon, label="Ship it?"]
	start -> plan -> implement -> test -> gate
	gate -> implement [condition="outcome=fail"]
	gate -> review [condition="outcome=success"]
	review -> exit [label="[Y] Yes"]
	review -> plan [label="[N] No"]
}`

func resumeScript() *script.Script {
	return steps(map[string][]any{
		"plan":      {"planned [context:plan.version=1] [outcome:success]", "replanned [context:plan.version=2] [outcome:success]"},
		"implement": {"[outcome:success]"},
		"test":      {"1 failure [outcome:fail]", "[outcome:success]"},
	})
}

func resumeAnswers() engine.Interviewer { return interview.NewQueue(values("N", "Y")) }

// cancelAfter cancels the run once the n-th StageCompleted/StageFailed event arrives.
type cancelAfter struct {
	n      int
	seen   int
	cancel context.CancelFunc
}

func (c *cancelAfter) OnEvent(e engine.Event) {
	if e.Type == engine.EventStageCompleted || (e.Type == engine.EventStageFailed && !e.WillRetry) {
		c.seen++
		if c.seen == c.n {
			c.cancel()
		}
	}
}

// §11.12: checkpoint save and resume produces the same result — from every
// checkpoint of the run.
func TestResumeFromEveryCheckpointGivesTheSameResult(t *testing.T) {
	resumeFromEveryCut(t, nil, func(cut int, first runOut) {
		cp := loadCheckpoint(t, first.root)
		if cp.State != engine.StateCancelled || cp.NextNode == "" {
			t.Fatalf("cut %d: checkpoint state=%s next=%q", cut, cp.State, cp.NextNode)
		}
	})
}

// resumeFromEveryCut runs resumeDOT whole, then once per stage cancelled
// after that stage and resumed, and checks the two parts add up to the
// whole run. configure (when not nil) sets up each cut's engine; check
// looks at the first part.
func resumeFromEveryCut(t *testing.T, configure func(*engine.Config), check func(cut int, first runOut)) {
	t.Helper()
	full := runGraph(t, resumeDOT, runOpts{backend: resumeScript(), interviewer: resumeAnswers()})
	wantStatus(t, full.res, "success")
	stages := len(full.res.Path)
	for cut := 1; cut < stages; cut++ {
		ctx, cancel := context.WithCancel(context.Background())
		iv := resumeAnswers()
		first := runGraph(t, resumeDOT, runOpts{backend: resumeScript(), interviewer: iv, ctx: ctx, configure: func(c *engine.Config) {
			if configure != nil {
				configure(c)
			}
			c.Observers = append(c.Observers, &cancelAfter{n: cut, cancel: cancel})
		}})
		cancel()
		if !first.res.Interrupted || first.res.Status != "fail" || first.res.FailureReason != "interrupted" {
			t.Fatalf("cut %d: first part = %+v", cut, first.res)
		}
		check(cut, first)
		rec := &recorder{}
		cfg := first.cfg
		cfg.Observers = []engine.Observer{rec}
		// A fresh script, as in a new process: the engine's execution count
		// (Request.Execution, restored from the checkpoint) must pick up where
		// the first part stopped, not start the node's responses over.
		cfg.Backend, cfg.Interviewer = resumeScript(), iv
		second, err := engine.New(cfg).Resume(t.Context(), first.root)
		if err != nil {
			t.Fatalf("cut %d: resume: %v", cut, err)
		}
		wantStatus(t, second, "success")
		if got := append(slices.Clone(first.res.Path), second.Path...); !slices.Equal(got, full.res.Path) {
			t.Fatalf("cut %d: paths %v + %v != %v", cut, first.res.Path, second.Path, full.res.Path)
		}
		if !reflect.DeepEqual(normalise(second.Context), normalise(full.res.Context)) {
			t.Fatalf("cut %d: context\n%v\nwant\n%v", cut, second.Context, full.res.Context)
		}
		if !reflect.DeepEqual(second.Attempts, full.res.Attempts) || !slices.Equal(second.CompletedNodes, full.res.CompletedNodes) {
			t.Fatalf("cut %d: attempts %v completed %v", cut, second.Attempts, second.CompletedNodes)
		}
		// The resumed part starts with PipelineResumed and continues the seq.
		evs := rec.all()
		if evs[0].Type != engine.EventPipelineResumed || evs[0].Seq <= lastSeq(first.rec) {
			t.Fatalf("cut %d: first resumed event %s#%d after seq %d", cut, evs[0].Type, evs[0].Seq, lastSeq(first.rec))
		}
	}
}

func lastSeq(r *recorder) int64 {
	evs := r.all()
	return evs[len(evs)-1].Seq
}

// normalise round-trips through JSON, as a checkpoint does.
func normalise(m map[string]any) map[string]any {
	b, _ := json.Marshal(m)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return out
}

func TestCancelMidNodeKeepsTheNodeForResume(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	sc := &script.Script{Nodes: map[string][]script.Response{"test": {{Text: "[outcome:success]", DelayMS: 60_000}}}}
	atWork := make(chan struct{})
	be := engine.BackendFunc(func(ctx context.Context, req engine.Request) (engine.Result, error) {
		if req.NodeID == "test" {
			close(atWork) // the node's one execution has begun
		}
		return sc.Run(ctx, req)
	})
	go func() {
		<-atWork
		cancel()
	}()
	began := time.Now()
	first := runGraph(t, linearResume, runOpts{backend: be, ctx: ctx})
	if time.Since(began) > 10*time.Second {
		t.Fatalf("cancel took %v", time.Since(began))
	}
	if !first.res.Interrupted || first.res.Cancelled {
		t.Fatalf("result = %+v", first.res)
	}
	wantPath(t, first.res, "start", "build")
	cp := loadCheckpoint(t, first.root)
	if cp.NextNode != "test" || cp.CurrentNode != "build" || cp.State != engine.StateCancelled {
		t.Fatalf("checkpoint current=%s next=%s state=%s", cp.CurrentNode, cp.NextNode, cp.State)
	}
	if first.res.Attempts["test"] != 0 {
		t.Errorf("an interrupted attempt was counted: %v", first.res.Attempts)
	}
	cfg := first.cfg
	cfg.Backend = &script.Script{}
	res, err := engine.New(cfg).Resume(t.Context(), first.root)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, res, "success")
	wantPath(t, res, "test", "report", "exit")
}

const linearResume = `digraph L {
	start [shape=Mdiamond]
	exit [shape=Msquare]
	build [prompt="b", fidelity="full"]
	test [prompt="t", fidelity="full"]
	report [prompt="r", fidelity="full"]
	start -> build -> test -> report -> exit
}`

func TestFirstAgentStageAfterResumeDegradesFullFidelity(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	first := runGraph(t, linearResume, runOpts{ctx: ctx, configure: func(c *engine.Config) {
		c.Observers = append(c.Observers, &cancelAfter{n: 2, cancel: cancel}) // after build
	}})
	cancel()
	be := &recordingBackend{inner: &script.Script{}}
	cfg := first.cfg
	cfg.Backend = be
	res, err := engine.New(cfg).Resume(t.Context(), first.root)
	if err != nil {
		t.Fatal(err)
	}
	wantPath(t, res, "test", "report", "exit")
	test, report := be.requests("test")[0], be.requests("report")[0]
	if test.Fidelity != string(fidelity.SummaryHigh) || test.ThreadKey != "" || !strings.Contains(test.Preamble, "build") {
		t.Errorf("first resumed stage: fidelity=%s thread=%q preamble=%q", test.Fidelity, test.ThreadKey, test.Preamble)
	}
	if report.Fidelity != string(fidelity.Full) || report.ThreadKey != "test" || report.Preamble != "" {
		t.Errorf("second resumed stage: fidelity=%s thread=%q", report.Fidelity, report.ThreadKey)
	}
}

// A changed pipeline.dot no longer matches the checkpoint's sha256: resume
// refuses it rather than run another graph with this run's state.
func TestResumeRefusesAChangedPipelineSource(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	first := runGraph(t, resumeDOT, runOpts{backend: resumeScript(), interviewer: resumeAnswers(), ctx: ctx, configure: func(c *engine.Config) {
		c.Observers = append(c.Observers, &cancelAfter{n: 2, cancel: cancel})
	}})
	path := filepath.Join(first.root, engine.SourceFile)
	if err := os.WriteFile(path, []byte(strings.Replace(resumeDOT, "plan $goal", "plan something else", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := engine.New(first.cfg).Resume(t.Context(), first.root)
	if err == nil || !strings.Contains(err.Error(), "was changed") {
		t.Fatalf("resume with a changed %s: %v", engine.SourceFile, err)
	}
}

// Runs checkpointed before pipeline.dot existed carry their source in
// graph_dot: they still resume, and get their pipeline.dot then.
func TestResumeOfACheckpointThatEmbedsItsSource(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	first := runGraph(t, resumeDOT, runOpts{backend: resumeScript(), interviewer: resumeAnswers(), ctx: ctx, configure: func(c *engine.Config) {
		c.Observers = append(c.Observers, &cancelAfter{n: 2, cancel: cancel})
	}})
	cpPath := filepath.Join(first.root, engine.CheckpointFile)
	var raw map[string]any
	readJSON(t, cpPath, &raw)
	raw["graph_dot"] = resumeDOT
	old, _ := json.Marshal(raw)
	if err := os.WriteFile(cpPath, old, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(first.root, engine.SourceFile))
	cfg := first.cfg
	cfg.Backend = resumeScript()
	res, err := engine.New(cfg).Resume(t.Context(), first.root)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, res, "success")
	if got := readFile(t, filepath.Join(first.root, engine.SourceFile)); got != resumeDOT {
		t.Fatalf("%s after the resume = %q", engine.SourceFile, got)
	}
}

func TestResumeRefusesFinishedRunsAndOtherGraphs(t *testing.T) {
	done := runGraph(t, linearResume, runOpts{})
	_, err := engine.New(done.cfg).Resume(t.Context(), done.root)
	if err == nil || !strings.Contains(err.Error(), "already finished with status success") {
		t.Errorf("resume of a finished run: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cut := runGraph(t, linearResume, runOpts{ctx: ctx, configure: func(c *engine.Config) {
		c.Observers = append(c.Observers, &cancelAfter{n: 2, cancel: cancel})
	}})
	cancel()
	other, src := prepare(t, strings.Replace(linearResume, `prompt="r"`, `prompt="something else"`, 1))
	_, err = engine.New(cut.cfg).ResumeGraph(t.Context(), other, src, cut.root)
	if err == nil || !strings.Contains(err.Error(), "different graph") {
		t.Errorf("resume with another graph: %v", err)
	}
	_, err = engine.New(cut.cfg).Resume(t.Context(), filepath.Join(t.TempDir(), "nothing"))
	if err == nil || !strings.Contains(err.Error(), "no checkpoint") {
		t.Errorf("resume of an empty directory: %v", err)
	}
	// A corrupt checkpoint is reported, never half-used.
	bad := t.TempDir()
	os.WriteFile(filepath.Join(bad, engine.CheckpointFile), []byte(`{"version":1,"run_id":`), 0o644)
	_, err = engine.New(cut.cfg).Resume(t.Context(), bad)
	if err == nil || !strings.Contains(err.Error(), "not valid JSON") {
		t.Errorf("resume of a corrupt checkpoint: %v", err)
	}
}

// A run whose process was killed after its journal recorded its end and
// before it told it is refused by Resume as ended but not told (the
// command line's resume then has TellEnd end it); once told, it is told.
func TestResumeSaysWhetherAnEndedRunsEndWasTold(t *testing.T) {
	done := runGraph(t, linearResume, runOpts{})
	var ended *engine.EndedError
	if _, err := engine.New(done.cfg).Resume(t.Context(), done.root); !errors.As(err, &ended) || !ended.Told {
		t.Fatalf("resume of a run that told its end: %v", err)
	}
	trace := filepath.Join(done.root, engine.EventsFile)
	lines := strings.SplitAfter(strings.TrimSpace(readFile(t, trace)), "\n")
	if !strings.Contains(lines[len(lines)-1], string(engine.EventPipelineCompleted)) {
		t.Fatalf("the journal's last line is not the run's end: %s", lines[len(lines)-1])
	}
	os.WriteFile(trace, []byte(strings.Join(lines[:len(lines)-1], "")), 0o644) // killed before telling it
	if _, err := engine.New(done.cfg).Resume(t.Context(), done.root); !errors.As(err, &ended) || ended.Told {
		t.Fatalf("resume of a run that recorded its end but did not tell it: %v", err)
	}
	g, src := prepare(t, linearResume)
	res, err := engine.New(done.cfg).TellEnd(t.Context(), g, src, done.root)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, res, "success")
	if _, err := engine.New(done.cfg).Resume(t.Context(), done.root); !errors.As(err, &ended) || !ended.Told {
		t.Fatalf("resume after TellEnd: %v", err)
	}
}

func TestResumeCutsATornTraceLineAndContinuesTheSequence(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	first := runGraph(t, linearResume, runOpts{ctx: ctx, configure: func(c *engine.Config) {
		c.Observers = append(c.Observers, &cancelAfter{n: 2, cancel: cancel})
	}})
	cancel()
	trace := filepath.Join(first.root, engine.EventsFile)
	f, _ := os.OpenFile(trace, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"run_id":"run-test","seq":99999,"ty`) // a crash mid-write
	f.Close()
	res, err := engine.New(first.cfg).Resume(t.Context(), first.root)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, res, "success")
	var prev int64
	for i, line := range strings.Split(strings.TrimSpace(readFile(t, trace)), "\n") {
		var e engine.Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("trace line %d is not JSON: %v", i+1, err)
		}
		if e.Seq != prev+1 {
			t.Fatalf("trace line %d has seq %d after %d", i+1, e.Seq, prev)
		}
		prev = e.Seq
	}
}

func TestCheckpointCarriesWhatResumeNeeds(t *testing.T) {
	out := runGraph(t, resumeDOT, runOpts{backend: resumeScript(), interviewer: resumeAnswers()})
	raw := map[string]any{}
	readJSON(t, filepath.Join(out.root, engine.CheckpointFile), &raw)
	for _, key := range []string{"timestamp", "current_node", "completed_nodes", "node_retries", "context", "logs",
		"run_id", "next_node", "path", "attempts", "visits", "goal_gate_outcomes", "event_seq", "usage", "steps",
		"restarts", "graph_file", "graph_sha256", "history", "state"} {
		if _, ok := raw[key]; !ok {
			t.Errorf("checkpoint lacks %q", key)
		}
	}
	// The source is saved once, not in every checkpoint; LoadCheckpoint reads it back.
	if _, ok := raw["graph_dot"]; ok {
		t.Error("the checkpoint carries the DOT source")
	}
	if got := readFile(t, filepath.Join(out.root, engine.SourceFile)); got != resumeDOT {
		t.Errorf("%s = %q", engine.SourceFile, got)
	}
	cp := loadCheckpoint(t, out.root)
	if cp.GraphDOT != resumeDOT || cp.Visits["plan"] != 2 || cp.GoalGates["implement"] != engine.StatusSuccess || cp.Steps != len(out.res.Path) {
		t.Errorf("checkpoint = visits %v gates %v steps %d", cp.Visits, cp.GoalGates, cp.Steps)
	}
}

// The hand-written checkpoint encoder must say exactly what encoding/json
// would say about the same Checkpoint.
func TestCheckpointEncodingMatchesEncodingJSON(t *testing.T) {
	out := runGraph(t, resumeDOT, runOpts{backend: resumeScript(), interviewer: resumeAnswers()})
	raw := readFile(t, filepath.Join(out.root, engine.CheckpointFile))
	var fromFile map[string]any
	if err := json.Unmarshal([]byte(raw), &fromFile); err != nil {
		t.Fatal(err)
	}
	// Where the journal's records after the snapshot begin: the file's own business.
	if off, ok := fromFile["journal_offset"].(float64); !ok || off <= 0 {
		t.Errorf("checkpoint.json's journal_offset = %v", fromFile["journal_offset"])
	}
	delete(fromFile, "journal_offset")
	cp := loadCheckpoint(t, out.root)
	cp.GraphDOT = "" // read from pipeline.dot, not part of the file
	std, err := json.Marshal(cp)
	if err != nil {
		t.Fatal(err)
	}
	var fromStd map[string]any
	json.Unmarshal(std, &fromStd)
	if !reflect.DeepEqual(fromFile, fromStd) {
		for k := range fromStd {
			if !reflect.DeepEqual(fromFile[k], fromStd[k]) {
				t.Errorf("field %s: file %v, encoding/json %v", k, fromFile[k], fromStd[k])
			}
		}
		t.Fatalf("checkpoint encodings differ (file has %d fields, encoding/json %d)", len(fromFile), len(fromStd))
	}
	odd := engine.Counts{`a"b\c`: 1, "é": 2, "plain": 3}
	b, _ := odd.MarshalJSON()
	var back map[string]int
	if err := json.Unmarshal(b, &back); err != nil || back[`a"b\c`] != 1 || back["é"] != 2 || back["plain"] != 3 {
		t.Errorf("Counts %s decodes to %v (%v)", b, back, err)
	}
}
