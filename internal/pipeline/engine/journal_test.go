package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/fidelity"
	"nanohost/internal/pipeline/script"
)

// journalLine is a line of events.jsonl as encoding/json reads and writes it.
type journalLine struct {
	engine.Event
	Commit *engine.Delta `json:"commit,omitempty"`
}

// readJournal returns the lines of a run's events.jsonl and the offset
// just after each.
func readJournal(t testing.TB, root string) ([]journalLine, []int) {
	t.Helper()
	data := readFile(t, filepath.Join(root, engine.EventsFile))
	var lines []journalLine
	var ends []int
	off := 0
	for line := range strings.SplitAfterSeq(data, "\n") {
		if !strings.HasSuffix(line, "\n") {
			break
		}
		var l journalLine
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("journal line at offset %d: %v\n%s", off, err, line)
		}
		off += len(line)
		lines = append(lines, l)
		ends = append(ends, off)
	}
	return lines, ends
}

// wantContinuousSeq fails unless the journal's events are numbered 1, 2, 3…
func wantContinuousSeq(t testing.TB, root string) {
	t.Helper()
	lines, _ := readJournal(t, root)
	for i, l := range lines {
		if l.Seq != int64(i+1) {
			t.Fatalf("journal line %d has seq %d", i+1, l.Seq)
		}
	}
}

// The hand-written journal encoder must write exactly what encoding/json
// would, for every kind of event and commit a run produces.
func TestJournalLineEncodingMatchesEncodingJSON(t *testing.T) {
	var lines []journalLine
	runs := []runOut{
		runGraph(t, resumeDOT, runOpts{backend: resumeScript(), interviewer: resumeAnswers()}),
		runGraph(t, parallelGraph("", `prompt="pick <the> best & say \"why\""`), runOpts{backend: steps(map[string][]any{
			"a1": {"drafted A [context:a.draft=yes] [outcome:success]"}, "c": {"C crashed\n\tbadly [outcome:fail]"},
		})}),
		runGraph(t, reviewDOT, runOpts{interviewer: &askLog{answers: values("F", "A")}}),
	}
	for _, out := range runs {
		for _, e := range out.rec.all() { // as the engine made them
			lines = append(lines, journalLine{Event: e})
		}
		read, _ := readJournal(t, out.root) // as read back: numbers are float64, commits decoded
		lines = append(lines, read...)
	}
	odd := "tab\t, quote \", backslash \\, <html> & ünïcode \u2028 and \x01"
	lines = append(lines, journalLine{
		Event: engine.Event{RunID: odd, Seq: 7, Time: time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("X", 3600)), Type: engine.EventWarning,
			NodeID: odd, Label: odd, Message: odd, WillRetry: true, Delay: -1, Usage: &engine.Usage{CostUSD: 0.1 + 0.2, InputTokens: 1e12},
			Decision: &engine.Decision{From: odd, Rule: "x", Values: map[string]string{odd: odd, "": ""}},
			Data: map[string]any{odd: odd, "f": 1.5e-7, "big": 1e21, "nil": nil, "list": []string{odd}, "nilList": []string(nil),
				"nested": map[string]any{"b": []any{1, "x", true}}, "status": engine.StatusSuccess, "i64": int64(-3)}},
		Commit: &engine.Delta{CurrentNode: odd, NextNode: "", Incoming: &engine.EdgeKey{From: odd, To: "b", Index: 2}, State: "fail", Reason: odd,
			Branch: &engine.FinishedBranch{Node: "p", Execution: 2, Edge: 1, Result: engine.BranchResult{ID: "b", Status: engine.StatusFail, Nodes: []string{}}},
			Path:   []string{odd}, CompletedNodes: []string{"a", odd}, Visits: engine.Counts{odd: 1, "a": 2}, Attempts: engine.Counts{"a": 3},
			StageIndex: engine.Counts{"a": 9}, NodeRetries: engine.Counts{"a": 0}, ResetGates: true, GoalGates: map[string]engine.Status{odd: engine.StatusFail},
			ResetContext: true, Context: map[string]any{odd: 1.25, "results": []engine.BranchResult{{ID: "x", Nodes: []string{"x"}}}},
			ResetHistory: true, History: []fidelity.Stage{{NodeID: odd, Status: "success", Response: odd, Duration: time.Second, Attempts: 2}},
			Logs: []string{odd}, Usage: engine.Usage{OutputTokens: 5}, Tally: engine.Tally{Steps: 3, Restarts: 1}, StageRoot: "restart-1"},
	})
	for _, l := range lines {
		checkJournalLine(t, l)
	}
}

func checkJournalLine(t *testing.T, l journalLine) {
	t.Helper()
	got, err := engine.EncodeJournalLine(l.Event, l.Commit)
	want, werr := json.Marshal(l)
	if err != nil || werr != nil {
		t.Fatalf("encode %s: %v / encoding/json: %v", l.Type, err, werr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("journal line of %s:\n got %s\nwant %s", l.Type, got, want)
	}
}

func FuzzJournalLineEncoding(f *testing.F) {
	f.Add("n1", "a message\nwith lines", "k", "v", 3)
	f.Add("<&>", "\xff\xfe", "\u2029", "é", -1)
	f.Fuzz(func(t *testing.T, node, msg, key, value string, n int) {
		checkJournalLine(t, journalLine{
			Event: engine.Event{RunID: "r", Seq: 1, Type: engine.EventStageCompleted, NodeID: node, Message: msg, Index: n,
				Decision: &engine.Decision{From: node, To: value, Rule: key, Values: map[string]string{key: value}},
				Data:     map[string]any{key: value, "n": n}},
			Commit: &engine.Delta{CurrentNode: node, NextNode: value, Path: []string{node}, Attempts: engine.Counts{node: n},
				Context: map[string]any{key: value}, History: []fidelity.Stage{{NodeID: node, Status: value, Notes: msg}}, Logs: []string{msg}},
		})
	})
}

const journalDOT = `digraph J {
	graph [goal="keep everything"]
	start [shape=Mdiamond]
	exit [shape=Msquare]
	a [prompt="a"]
	b [prompt="b", goal_gate=true]
	c [prompt="c"]
	d [prompt="d"]
	start -> a -> b -> c -> d -> exit
}`

func journalScript() *script.Script {
	return steps(map[string][]any{
		"a": {"a done [context:a.n=1] [outcome:success]"},
		"b": {"b done [context:b.n=2] [outcome:success]"},
		"c": {"c done [context:c.n=3] [outcome:success]"},
		"d": {"d done [outcome:success]"},
	})
}

// imageAt runs journalDOT and copies the run directory, as a crash would
// leave it, when node stops at its backend call; the run then completes.
// It returns the finished run and the directory copy.
func imageAt(t *testing.T, src string, be engine.Backend, stop string) (runOut, string) {
	t.Helper()
	image := filepath.Join(t.TempDir(), "image")
	var root string
	var once sync.Once
	var snap engine.Backend = backendFunc(func(ctx context.Context, req engine.Request) (engine.Result, error) {
		if req.NodeID == stop {
			once.Do(func() { copyDir(t, root, image) })
		}
		return be.Run(ctx, req)
	})
	out := runGraph(t, src, runOpts{backend: snap, configure: func(c *engine.Config) { root, c.Simulated = c.LogsRoot, isSim(be) }})
	wantStatus(t, out.res, "success")
	if _, err := os.Stat(image); err != nil {
		t.Fatalf("%s never reached its backend", stop)
	}
	return out, image
}

func copyDir(t testing.TB, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// resumeImage resumes a copy of a crash image and returns the result and
// the copy's directory.
func resumeImage(t testing.TB, image string, cfg engine.Config, be engine.Backend) (*engine.RunResult, string, error) {
	t.Helper()
	root := filepath.Join(t.TempDir(), "run")
	copyDir(t, image, root)
	cfg.LogsRoot, cfg.Backend, cfg.Observers = root, be, nil
	res, err := engine.New(cfg).Resume(t.Context(), root)
	return res, root, err
}

// A crash in the middle of writing a node's record leaves some prefix of
// it: cut the journal at every byte offset of its last record, and the
// resume must continue exactly as if the node had not finished (the cut
// record is dropped, the node runs again) or, with the record whole, as if
// it had — never with a torn state, and with seq continuing.
//
// The stages are simulated (no stage files: the resumes are about the
// journal), so the 1,500-odd resumes stay quick.
func TestJournalCutAtEveryByteOfItsLastRecordResumes(t *testing.T) {
	full, image := imageAt(t, journalDOT, script.Sim{}, "c")
	lines, ends := readJournal(t, image)
	var commits []int // indexes of commit lines
	for i, l := range lines {
		if l.Commit != nil {
			commits = append(commits, i)
		}
	}
	last := commits[len(commits)-1]
	if lines[last].NodeID != "b" {
		t.Fatalf("the image's last commit is after %s, want b", lines[last].NodeID)
	}
	from, to := ends[commits[len(commits)-2]], ends[last]
	journal := readFile(t, filepath.Join(image, engine.EventsFile))
	snapshot := readFile(t, filepath.Join(image, engine.CheckpointFile))
	t.Logf("cutting the last record (%d bytes) at each of its offsets", to-from)
	// One directory serves every cut: a resume changes only the journal and
	// the snapshot (and rewrites the stage files of c and d).
	root := filepath.Join(t.TempDir(), "run")
	copyDir(t, image, root)
	cfg := full.cfg
	cfg.LogsRoot, cfg.Observers = root, nil
	for cut := from; cut <= to; cut++ {
		for name, data := range map[string]string{engine.EventsFile: journal[:cut], engine.CheckpointFile: snapshot} {
			if err := os.WriteFile(filepath.Join(root, name), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		whole := cut == to
		cp := loadCheckpoint(t, root)
		if wantCurrent := map[bool]string{true: "b", false: "a"}[whole]; cp.CurrentNode != wantCurrent || cp.State != engine.StateRunning {
			t.Fatalf("cut at %d: LoadCheckpoint says current %s (%s), want %s", cut, cp.CurrentNode, cp.State, wantCurrent)
		}
		cfg.Backend, cfg.Simulated = script.Sim{}, true
		res, err := engine.New(cfg).Resume(t.Context(), root)
		if err != nil {
			t.Fatalf("cut at %d: resume: %v", cut, err)
		}
		wantStatus(t, res, "success")
		wantPath := []string{"c", "d", "exit"}
		if !whole {
			wantPath = append([]string{"b"}, wantPath...)
		}
		if !slices.Equal(res.Path, wantPath) {
			t.Fatalf("cut at %d: resumed path %v, want %v", cut, res.Path, wantPath)
		}
		if !reflect.DeepEqual(normalise(res.Context), normalise(full.res.Context)) || !maps.Equal(res.Attempts, full.res.Attempts) ||
			!slices.Equal(res.CompletedNodes, full.res.CompletedNodes) {
			t.Fatalf("cut at %d: resumed to context %v attempts %v completed %v\nwant %v %v %v", cut,
				res.Context, res.Attempts, res.CompletedNodes, full.res.Context, full.res.Attempts, full.res.CompletedNodes)
		}
		wantContinuousSeq(t, root)
	}
}

// Appends are sequential, so a damaged line followed by a commit is not a
// crash's torn end: resume refuses the journal instead of skipping a step.
func TestJournalDamagedInTheMiddleIsRefused(t *testing.T) {
	full, image := imageAt(t, journalDOT, journalScript(), "d")
	lines, ends := readJournal(t, image)
	i := slices.IndexFunc(lines, func(l journalLine) bool { return l.Type == engine.EventStageStarted && l.NodeID == "b" })
	path := filepath.Join(image, engine.EventsFile)
	data := []byte(readFile(t, path))
	copy(data[ends[i-1]:], "\x00\x00garbage")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := resumeImage(t, image, full.cfg, journalScript())
	if err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("resume of a journal damaged in the middle: %v", err)
	}
}

// A crash inside a parallel block: the branches that finished before it
// are not run again; only the one still running is.
func TestCrashInsideAParallelBlockResumesOnlyUnfinishedBranches(t *testing.T) {
	be := steps(map[string][]any{
		"a1": {"drafted A [context:a.draft=yes] [outcome:success]"},
		"a2": {"A is done [outcome:success]"},
		"b":  {"B works [outcome:success]"},
		"c":  {"C works too [outcome:success]"},
	})
	// c waits until the other two branches have finished, then the crash image is taken.
	var done sync.WaitGroup
	done.Add(2)
	var root string
	image := filepath.Join(t.TempDir(), "image")
	waiting := backendFunc(func(ctx context.Context, req engine.Request) (engine.Result, error) {
		if req.NodeID == "c" {
			done.Wait()
			copyDir(t, root, image)
		}
		return be.Run(ctx, req)
	})
	finished := engine.ObserverFunc(func(e engine.Event) {
		if e.Type == engine.EventParallelBranchCompleted && e.Branch != "c" {
			done.Done()
		}
	})
	full := runGraph(t, parallelGraph("", ""), runOpts{backend: waiting, configure: func(c *engine.Config) {
		root = c.LogsRoot
		c.Observers = append(c.Observers, finished)
	}})
	wantStatus(t, full.res, "success")

	cp := loadCheckpoint(t, image)
	if cp.NextNode != "fan" || len(cp.Branches) != 2 {
		t.Fatalf("the crash image's state: next %s, finished branches %+v", cp.NextNode, cp.Branches)
	}
	// Had a1, a2 or b run again, the run could not succeed.
	again := &recordingBackend{inner: steps(map[string][]any{
		"a1": {script.Response{Status: "fail", FailureReason: "a1 must not run twice"}},
		"a2": {script.Response{Status: "fail", FailureReason: "a2 must not run twice"}},
		"b":  {script.Response{Status: "fail", FailureReason: "b must not run twice"}},
		"c":  {"C works too [outcome:success]"},
	})}
	res, resumed, err := resumeImage(t, image, full.cfg, again)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, res, "success")
	wantPath(t, res, "fan", "join", "after", "exit")
	for _, n := range []string{"a1", "a2", "b"} {
		if len(again.requests(n)) != 0 {
			t.Errorf("branch node %s ran again after the resume", n)
		}
	}
	if len(again.requests("c")) != 1 {
		t.Errorf("c ran %d times after the resume, want once", len(again.requests("c")))
	}
	if !maps.Equal(res.Attempts, full.res.Attempts) || !slices.Equal(res.CompletedNodes, full.res.CompletedNodes) {
		t.Errorf("resumed attempts %v completed %v, want %v %v", res.Attempts, res.CompletedNodes, full.res.Attempts, full.res.CompletedNodes)
	}
	var results []engine.BranchResult
	b, _ := json.Marshal(res.Context["parallel.results"])
	json.Unmarshal(b, &results)
	if len(results) != 3 || results[0].ContextUpdates["a.draft"] != "yes" || results[2].LastResponse != "C works too" {
		t.Errorf("parallel.results after the resume = %s", b)
	}
	wantContinuousSeq(t, resumed)
}

// Cancelling a run inside a parallel block keeps the branches that
// finished: the resume runs the others only.
func TestCancelInsideAParallelBlockKeepsFinishedBranches(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	be := steps(map[string][]any{
		"c": {script.Response{Text: "[outcome:success]", DelayMS: 60_000}},
	})
	var finished sync.WaitGroup
	finished.Add(2)
	go func() { finished.Wait(); engine.Cancel(cancel, "tester") }()
	first := runGraph(t, parallelGraph("", ""), runOpts{backend: be, ctx: ctx, configure: func(c *engine.Config) {
		c.Observers = append(c.Observers, engine.ObserverFunc(func(e engine.Event) {
			if e.Type == engine.EventParallelBranchCompleted && e.Branch != "c" {
				finished.Done()
			}
		}))
	}})
	if !first.res.Cancelled {
		t.Fatalf("first part: %+v", first.res)
	}
	cp := loadCheckpoint(t, first.root)
	if cp.State != engine.StateCancelled || cp.NextNode != "fan" || len(cp.Branches) != 2 {
		t.Fatalf("cancelled state: %s next %s branches %+v", cp.State, cp.NextNode, cp.Branches)
	}
	again := &recordingBackend{inner: &script.Script{}}
	cfg := first.cfg
	cfg.Backend = again
	rec := &recorder{}
	cfg.Observers = []engine.Observer{rec}
	res, err := engine.New(cfg).Resume(t.Context(), first.root)
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, res, "success")
	for _, n := range []string{"a1", "a2", "b"} {
		if len(again.requests(n)) != 0 {
			t.Errorf("%s ran again", n)
		}
	}
	started := rec.ofType(engine.EventParallelStarted)
	if len(started) != 1 || !reflect.DeepEqual(started[0].Data["restored_branches"], []string{"a1", "b"}) {
		t.Errorf("ParallelStarted after the resume: %+v", started)
	}
	wantContinuousSeq(t, first.root)
}

// While a run works, LoadCheckpoint (the host's status, the dashboard)
// sees the state as of its last commit, though checkpoint.json is only
// rewritten now and then.
func TestLoadCheckpointSeesTheLatestCommitBetweenSnapshots(t *testing.T) {
	_, image := imageAt(t, journalDOT, journalScript(), "d")
	snap, err := os.ReadFile(filepath.Join(image, engine.CheckpointFile))
	if err != nil {
		t.Fatal(err)
	}
	var raw engine.Checkpoint
	json.Unmarshal(snap, &raw)
	if raw.NextNode != "start" {
		t.Fatalf("checkpoint.json was rewritten mid-run (next %s): the test needs the first snapshot", raw.NextNode)
	}
	cp := loadCheckpoint(t, image)
	if cp.CurrentNode != "c" || cp.NextNode != "d" || !slices.Equal(cp.CompletedNodes, []string{"start", "a", "b", "c"}) ||
		cp.Context["c.n"] != "3" || cp.Visits["c"] != 1 || cp.GoalGates["b"] != engine.StatusSuccess || cp.Steps != 4 {
		t.Fatalf("LoadCheckpoint = current %s next %s completed %v context %v visits %v gates %v steps %d",
			cp.CurrentNode, cp.NextNode, cp.CompletedNodes, cp.Context, cp.Visits, cp.GoalGates, cp.Steps)
	}
}

// checkpoint.json is rewritten when the run waits at a human gate (where
// it may wait for hours) and when it stops.
func TestSnapshotAtAGateAndAtTheEnd(t *testing.T) {
	var root string
	var atGate engine.Checkpoint
	iv := engine.InterviewerFunc(func(ctx context.Context, q engine.Question) (engine.Answer, error) {
		readJSON(t, filepath.Join(root, engine.CheckpointFile), &atGate)
		return engine.Answer{Value: "A"}, nil
	})
	out := runGraph(t, reviewDOT, runOpts{interviewer: iv, configure: func(c *engine.Config) { root = c.LogsRoot }})
	wantStatus(t, out.res, "success")
	if atGate.NextNode != "review_gate" || atGate.CurrentNode != "start" {
		t.Errorf("checkpoint.json while the gate asks: current %s next %s", atGate.CurrentNode, atGate.NextNode)
	}
	var end engine.Checkpoint
	readJSON(t, filepath.Join(root, engine.CheckpointFile), &end)
	if end.State != engine.StateSuccess || end.CurrentNode != "exit" || end.JournalOffset != int64(len(readFile(t, filepath.Join(root, engine.EventsFile))))-lastLineLen(t, root) {
		t.Errorf("final checkpoint.json: state %s current %s offset %d", end.State, end.CurrentNode, end.JournalOffset)
	}
}

// lastLineLen is the length of the journal's last line (PipelineCompleted,
// written after the final snapshot).
func lastLineLen(t *testing.T, root string) int64 {
	lines, ends := readJournal(t, root)
	if lines[len(lines)-1].Type != engine.EventPipelineCompleted {
		t.Fatalf("last event %s", lines[len(lines)-1].Type)
	}
	return int64(ends[len(ends)-1] - ends[len(ends)-2])
}

// The record of a node does not grow with the run, and snapshots come
// further apart as the run grows, so the bytes written per node stay flat.
func TestJournalCostPerNodeIsConstant(t *testing.T) {
	perNode := map[int]float64{}
	for _, n := range []int{300, 1500} {
		counter := &snapshotCounter{}
		out := runGraph(t, linearPipeline(n), runOpts{backend: script.Sim{}, configure: func(c *engine.Config) {
			c.Journal = engine.JournalOpenerFunc(func(root string) (engine.Journal, error) {
				j, err := engine.FileJournals(false).OpenJournal(root)
				counter.Journal = j
				return counter, err
			})
		}})
		wantStatus(t, out.res, "success")
		_, ends := readJournal(t, out.root)
		perNode[n] = float64(ends[len(ends)-1]) / float64(n)
		// One at the start, one at the end, and in between at most one per
		// 256 commits, further apart as the run grows.
		if most := 2 + n/256; counter.snapshots > most {
			t.Errorf("%d nodes: %d snapshots, want at most %d", n, counter.snapshots, most)
		}
		// Simulated stages leave no files: only the run's own.
		entries, _ := os.ReadDir(out.root)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		if want := []string{".lock", "checkpoint.json", "events.jsonl", "manifest.json", "pipeline.dot"}; !slices.Equal(names, want) {
			t.Errorf("%d nodes: the run directory holds %v, want %v", n, names, want)
		}
	}
	if ratio := perNode[1500] / perNode[300]; ratio > 1.05 {
		t.Errorf("journal bytes per node grew from %.0f to %.0f (%.2f×)", perNode[300], perNode[1500], ratio)
	}
}

type snapshotCounter struct {
	engine.Journal
	snapshots int
}

func (c *snapshotCounter) Append(rec engine.Record) error {
	if rec.Snapshot != nil {
		c.snapshots++
	}
	return c.Journal.Append(rec)
}

func (c *snapshotCounter) Close() error { return c.Journal.(interface{ Close() error }).Close() }

// Start, exit and conditional nodes do no work and leave no stage
// directory; agent stages keep prompt.md, response.md and status.json.
func TestOnlyStagesThatWorkLeaveFiles(t *testing.T) {
	out := runGraph(t, `digraph F {
		start [shape=Mdiamond]
		exit [shape=Msquare]
		work [prompt="w"]
		check [shape=diamond]
		start -> work -> check -> exit
	}`, runOpts{})
	wantStatus(t, out.res, "success")
	for _, n := range []string{"start", "check", "exit"} {
		if _, err := os.Lstat(filepath.Join(out.root, n)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s has a stage directory (%v)", n, err)
		}
	}
	for _, f := range []string{"prompt.md", "response.md", "status.json"} {
		if _, err := os.Stat(filepath.Join(out.root, "work", f)); err != nil {
			t.Errorf("work: %v", err)
		}
	}
}

// Temporary files a crash left in the middle of replacing a file are
// removed on resume: the run directory's own, and those in the stage
// directory of the node that runs again. Other files stay.
func TestResumeRemovesLeftoverTemporaryFiles(t *testing.T) {
	full, image := imageAt(t, journalDOT, journalScript(), "c")
	leftovers := []string{".checkpoint.json.tmp-123", ".manifest.json.tmp-9", "c/.status.json.4711.tmp", "c/.status-42.tmp"}
	kept := []string{".keep", "notes.tmp.txt", "c/keep.tmp.md", "a/.status.json.1.tmp"}
	for _, f := range append(slices.Clone(leftovers), kept...) {
		if err := os.MkdirAll(filepath.Join(image, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(image, f), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	res, root, err := resumeImage(t, image, full.cfg, journalScript())
	if err != nil {
		t.Fatal(err)
	}
	wantStatus(t, res, "success")
	for _, f := range leftovers {
		if _, err := os.Lstat(filepath.Join(root, f)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("leftover %s is still there (%v)", f, err)
		}
	}
	// a/ is not touched again (a finished before the crash): its file is
	// left for people to see; the rest are not temporary files.
	for _, f := range kept {
		if _, err := os.Lstat(filepath.Join(root, f)); err != nil {
			t.Errorf("%s was removed: %v", f, err)
		}
	}
}

// memJournal keeps a run's records in memory: a second implementation of
// the journal seam (a database-backed one has the same shape).
type memJournal struct {
	mu      sync.Mutex
	records []engine.Record
}

func (m *memJournal) Append(rec engine.Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if rec.Snapshot != nil {
		// A database would store the snapshot and drop what it covers.
		m.records = nil
	}
	m.records = append(m.records, rec)
	return nil
}

func (m *memJournal) Replay(fn func(engine.Record) error) error {
	m.mu.Lock()
	records := slices.Clone(m.records)
	m.mu.Unlock()
	for _, rec := range records {
		if err := fn(rec); err != nil {
			return err
		}
	}
	return nil
}

// A journal kept elsewhere than the run directory plugs in through
// Config.Journal: runs stop and resume from it exactly as from the files.
func TestAnotherJournalPlugsIn(t *testing.T) {
	resumeFromEveryCut(t, func(c *engine.Config) {
		journals := map[string]*memJournal{}
		c.Journal = engine.JournalOpenerFunc(func(root string) (engine.Journal, error) {
			if journals[root] == nil {
				journals[root] = &memJournal{}
			}
			return journals[root], nil
		})
	}, func(cut int, first runOut) {
		for _, f := range []string{engine.EventsFile, engine.CheckpointFile} {
			if _, err := os.Lstat(filepath.Join(first.root, f)); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("cut %d: the run directory has %s with another journal configured", cut, f)
			}
		}
	})
	// A directory whose journal holds nothing is no run.
	_, err := engine.New(engine.Config{Loader: loader, Journal: engine.JournalOpenerFunc(func(string) (engine.Journal, error) { return &memJournal{}, nil })}).
		Resume(t.Context(), t.TempDir())
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "no checkpoint") {
		t.Errorf("resume of an empty journal: %v", err)
	}
}

// Every field of what the journal encoder writes by hand, filled in, must
// come out as encoding/json writes it: a field added to Event, Delta,
// EdgeKey, Decision or fidelity.Stage and forgotten in journal_encode.go
// fails here.
func TestJournalEncodingCoversEveryField(t *testing.T) {
	var l journalLine
	fill(reflect.ValueOf(&l).Elem(), 0)
	l.Commit = &engine.Delta{}
	fill(reflect.ValueOf(l.Commit).Elem(), 0)
	checkJournalLine(t, l)
}

// fill gives every settable field of v a non-zero value.
func fill(v reflect.Value, depth int) {
	if depth > 6 {
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("x<&>\"" + strings.Repeat("y", depth))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(depth) + 7)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(depth) + 7)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1.5)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(p.Elem(), depth+1)
		v.Set(p)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			fill(s.Index(i), depth+1)
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for i := range 2 {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			fill(k, depth+1+i)
			fill(e, depth+1)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Interface:
		v.Set(reflect.ValueOf("any" + strings.Repeat("z", depth)))
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Date(2026, 5, 6, 7, 8, 9, 10, time.UTC)))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), depth+1)
			}
		}
	}
}
