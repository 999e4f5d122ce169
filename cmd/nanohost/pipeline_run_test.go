package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runs"
)

// runResult is the --json contract of `pipeline run|resume`.
type runResult struct {
	RunID          string         `json:"run_id"`
	Status         string         `json:"status"`
	FailureReason  string         `json:"failure_reason"`
	Path           []string       `json:"path"`
	Attempts       map[string]int `json:"attempts"`
	CompletedNodes []string       `json:"completed_nodes"`
	Context        map[string]any `json:"context"`
	LogsRoot       string         `json:"logs_root"`
	Usage          *engine.Usage  `json:"usage"`
	Cancelled      bool           `json:"cancelled"`
	CancelledBy    string         `json:"cancelled_by"`
	Interrupted    bool           `json:"interrupted"`
	// the run's branch (--backend docker, kubernetes)
	Branch           string   `json:"branch"`
	Base             string   `json:"base"`
	Commits          []string `json:"commits"`
	Tree             string   `json:"tree"`
	GitDir           string   `json:"git_dir"`
	Folder           string   `json:"folder"`
	FastForwarded    bool     `json:"fast_forwarded"`
	NotFastForwarded string   `json:"not_fast_forwarded"`
}

func decodeRun(t *testing.T, r cliResult) runResult {
	t.Helper()
	var out runResult
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("stdout is not the run JSON: %v\nstdout: %s\nstderr: %s", err, r.stdout, r.stderr)
	}
	return out
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// The §11.13 integration smoke test, on the script backend.
const smokeDOT = `digraph test_pipeline {
    graph [goal="Create a hello world Python script"]

    start       [shape=Mdiamond]
    plan        [shape=box, prompt="Plan how to create a hello world script for: $goal"]
    implement   [shape=box, prompt="Write the code based on the plan", goal_gate=true]
    review      [shape=box, prompt="Review the code for correctness"]
    done        [shape=Msquare]

    start -> plan
    plan -> implement
    implement -> review [condition="outcome=success"]
    implement -> plan   [condition="outcome=fail", label="Retry"]
    review -> done      [condition="outcome=success"]
    review -> implement [condition="outcome=fail", label="Fix"]
}
`

const smokeScript = `{"nodes": {
  "plan": ["Plan: one file, hello.py, printing the greeting. [outcome:success]"],
  "implement": ["print('Hello, world!') [outcome:success]"],
  "review": ["Correct and idiomatic. [outcome:success]"]
}}`

func TestPipelineRunSmokeTest(t *testing.T) {
	dir := t.TempDir()
	dot := writeFile(t, dir, "smoke.dot", smokeDOT)
	script := writeFile(t, dir, "smoke.json", smokeScript)
	logs := filepath.Join(dir, "run")
	r := runNanohost(t, "", "pipeline", "run", dot, "--backend", "script", "--script", script, "--logs", logs, "--json")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	res := decodeRun(t, r)
	if res.Status != "success" || !slices.Contains(res.CompletedNodes, "implement") {
		t.Fatalf("result = %+v", res)
	}
	// Exactly the contract's keys, in its order ("cancelled" only when it is).
	var keys []string
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.Token()
	for dec.More() {
		k, _ := dec.Token()
		keys = append(keys, k.(string))
		var skip json.RawMessage
		dec.Decode(&skip)
	}
	if want := []string{"run_id", "status", "failure_reason", "path", "attempts", "completed_nodes", "context", "logs_root", "usage"}; !slices.Equal(keys, want) {
		t.Errorf("JSON keys = %v, want %v", keys, want)
	}
	if !slices.Equal(res.Path, []string{"start", "plan", "implement", "review", "done"}) {
		t.Errorf("path = %v", res.Path)
	}
	if res.LogsRoot != logs || !strings.HasPrefix(res.RunID, "pipeline-") || res.Usage == nil {
		t.Errorf("run_id %q logs_root %q usage %v", res.RunID, res.LogsRoot, res.Usage)
	}
	for _, node := range []string{"plan", "implement", "review"} {
		for _, f := range []string{"prompt.md", "response.md", "status.json"} {
			if _, err := os.Stat(filepath.Join(logs, node, f)); err != nil {
				t.Errorf("artifact %s/%s: %v", node, f, err)
			}
		}
	}
	if got, _ := os.ReadFile(filepath.Join(logs, "plan", "prompt.md")); string(got) != "Plan how to create a hello world script for: Create a hello world Python script" {
		t.Errorf("plan prompt.md = %q", got)
	}
	cp, err := engine.LoadCheckpoint(logs)
	if err != nil {
		t.Fatal(err)
	}
	if cp.CurrentNode != "done" || cp.GoalGates["implement"] != engine.StatusSuccess {
		t.Errorf("checkpoint current_node=%q goal gates %v", cp.CurrentNode, cp.GoalGates)
	}
	for _, n := range []string{"plan", "implement", "review"} {
		if !slices.Contains(cp.CompletedNodes, n) {
			t.Errorf("checkpoint completed_nodes %v lacks %s", cp.CompletedNodes, n)
		}
	}
	for _, f := range []string{"manifest.json", "events.jsonl"} {
		if _, err := os.Stat(filepath.Join(logs, f)); err != nil {
			t.Error(err)
		}
	}
}

func TestPipelineRunLiveLogAndDefaultRunDirectory(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "smoke.dot", smokeDOT)
	writeFile(t, dir, "fail.json", `{"nodes": {"review": ["Missing a shebang. [outcome:fail]", "[outcome:success]"]}}`)
	r := runNanohostIn(t, dir, "pipeline", "run", "smoke.dot", "--script", "fail.json")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if !strings.HasPrefix(lines[0], "run pipeline-") || !strings.Contains(lines[0], "logs in data/runs/pipeline-") {
		t.Errorf("first line = %q", lines[0])
	}
	for _, want := range []string{
		"[Pipeline] test_pipeline: Create a hello world Python script",
		"  → plan (1/4)", "  ✓ plan — ", "  ✗ review — ", "Missing a shebang.",
		"  ⤷ review → implement (it failed: outcome=fail)", "  → implement (2/4)", "  → done (4/4)",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("live log lacks %q:\n%s", want, r.stdout)
		}
	}
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "✓ Pipeline complete — ") {
		t.Errorf("last line = %q", last)
	}
	runID := strings.Fields(lines[0])[1]
	if _, err := engine.LoadCheckpoint(filepath.Join(dir, "data", "runs", runID)); err != nil {
		t.Errorf("default run directory: %v", err)
	}
}

// A scripted response can report usage: the run sums it, and a graph's
// max_tokens stops the run after the node that crossed it.
func TestPipelineRunSumsUsageAndStopsAtItsBudget(t *testing.T) {
	dir := t.TempDir()
	dot := writeFile(t, dir, "budget.dot", strings.Replace(smokeDOT, `graph [goal="Create a hello world Python script"]`,
		`graph [goal="Create a hello world Python script", max_tokens=5000]`, 1))
	script := writeFile(t, dir, "s.json", `{"default": {"status": "success", "usage": {"input_tokens": 2000, "output_tokens": 1000, "cost_usd": 0.02}}}`)
	r := runNanohost(t, "", "pipeline", "run", dot, "--script", script, "--logs", filepath.Join(dir, "run"), "--json")
	res := decodeRun(t, r)
	if r.code != 1 || !strings.Contains(res.FailureReason, "token budget exceeded: the run used 6000 tokens, max_tokens is 5000") {
		t.Fatalf("exit %d, reason %q", r.code, res.FailureReason)
	}
	if !slices.Equal(res.Path, []string{"start", "plan", "implement"}) || res.Usage == nil || *res.Usage != (engine.Usage{InputTokens: 4000, OutputTokens: 2000, CostUSD: 0.04}) {
		t.Errorf("path %v usage %+v", res.Path, res.Usage)
	}
}

// A stage may report an outcome word of the pipeline's own; conditions route
// on it, and for the goal gate it counts as done (issue 13).
func TestPipelineRunRoutesOnACustomOutcome(t *testing.T) {
	dir := t.TempDir()
	dot := writeFile(t, dir, "dod.dot", `digraph DoD {
    start [shape=Mdiamond]
    exit [shape=Msquare]
    check [prompt="Is there a definition of done?", goal_gate=true, retry_target=check]
    define [prompt="Write one"]
    plan [prompt="Plan"]
    start -> check
    check -> define [condition="outcome=needs_dod"]
    check -> plan [condition="outcome=has_dod"]
    define -> plan -> exit
}`)
	script := writeFile(t, dir, "s.json", `{"nodes": {"check": ["None given. [outcome:needs_dod]"]}, "default": "[outcome:success]"}`)
	r := runNanohost(t, "", "pipeline", "run", dot, "--script", script, "--logs", filepath.Join(dir, "run"), "--json")
	res := decodeRun(t, r)
	if r.code != 0 || res.Status != "success" || !slices.Equal(res.Path, []string{"start", "check", "define", "plan", "exit"}) {
		t.Fatalf("exit %d, status %s, path %v\n%s", r.code, res.Status, res.Path, r.stderr)
	}
	var status struct{ Outcome string }
	if err := json.Unmarshal([]byte(readFileT(t, filepath.Join(dir, "run", "check", "status.json"))), &status); err != nil || status.Outcome != "needs_dod" {
		t.Errorf("check/status.json outcome %q (%v)", status.Outcome, err)
	}
}

func readFileT(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestPipelineRunExitStatuses(t *testing.T) {
	dir := t.TempDir()
	dot := writeFile(t, dir, "smoke.dot", smokeDOT)
	failing := writeFile(t, dir, "failing.json", `{"nodes": {"review": [{"status": "fail", "failure_reason": "unreadable"}]}, "default": "[outcome:success]"}`)
	failLoop := strings.Replace(smokeDOT, `review -> implement [condition="outcome=fail", label="Fix"]`, "", 1)
	failDOT := writeFile(t, dir, "noloop.dot", failLoop)

	r := runNanohost(t, "", "pipeline", "run", failDOT, "--script", failing, "--logs", filepath.Join(dir, "r1"), "--json")
	if r.code != 1 {
		t.Fatalf("failed run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	res := decodeRun(t, r)
	if res.Status != "fail" || !strings.Contains(res.FailureReason, "review failed: unreadable") {
		t.Errorf("result = %+v", res)
	}
	if !slices.Equal(res.Path, []string{"start", "plan", "implement", "review"}) {
		t.Errorf("path = %v", res.Path)
	}

	invalid := writeFile(t, dir, "invalid.dot", `digraph X { a -> b }`)
	r = runNanohost(t, "", "pipeline", "run", invalid, "--json")
	if r.code != 2 || r.stdout != "" || !strings.Contains(r.stderr, "error [") || !strings.Contains(r.stderr, "invalid.dot") {
		t.Errorf("invalid graph: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runNanohost(t, "", "pipeline", "run", writeFile(t, dir, "syntax.dot", "digraph {"), "--json")
	if r.code != 2 || !strings.Contains(r.stderr, "syntax") {
		t.Errorf("syntax error: exit %d stderr %q", r.code, r.stderr)
	}
	for _, args := range [][]string{
		{"--backend", "warp"},
		{"--backend", "script"},
		{"--backend", "sim", "--script", failing},
		{"--script", filepath.Join(dir, "missing.json")},
		{"--answers", failing, "--auto-approve"},
	} {
		r = runNanohost(t, "", append([]string{"pipeline", "run", dot, "--logs", filepath.Join(dir, "never")}, args...)...)
		if r.code != 2 || r.stderr == "" {
			t.Errorf("%v: exit %d stderr %q", args, r.code, r.stderr)
		}
	}
	r = runNanohost(t, "", "pipeline", "run", dot, "--logs", filepath.Join(dir, "r1"))
	if r.code != 2 || !strings.Contains(r.stderr, "already holds a pipeline run") {
		t.Errorf("reused run directory: exit %d stderr %q", r.code, r.stderr)
	}
}

func TestPipelineRunAnswersAutoApproveAndConsole(t *testing.T) {
	dir := t.TempDir()
	dot := writeFile(t, dir, "review.dot", `digraph Review {
		start [shape=Mdiamond]
		exit  [shape=Msquare]
		review_gate [shape=hexagon, label="Review Changes"]
		ship_it [prompt="ship"]
		fixes [prompt="fix"]
		start -> review_gate
		review_gate -> ship_it [label="[A] Approve"]
		review_gate -> fixes   [label="[F] Fix"]
		ship_it -> exit
		fixes -> review_gate
	}`)
	answers := writeFile(t, dir, "a.json", `["F", {"text": "no"}, "ship_it"]`)
	res := decodeRun(t, runNanohost(t, "", "pipeline", "run", dot, "--answers", answers, "--logs", filepath.Join(dir, "r1"), "--json"))
	want := []string{"start", "review_gate", "fixes", "review_gate", "ship_it", "exit"}
	if !slices.Equal(res.Path, want) {
		t.Errorf("--answers path = %v (%s)", res.Path, res.FailureReason)
	}
	res = decodeRun(t, runNanohost(t, "", "pipeline", "run", dot, "--auto-approve", "--logs", filepath.Join(dir, "r2"), "--json"))
	if !slices.Equal(res.Path, []string{"start", "review_gate", "ship_it", "exit"}) {
		t.Errorf("--auto-approve path = %v", res.Path)
	}
	// An empty answers queue skips: the gate fails.
	empty := writeFile(t, dir, "empty.json", `[]`)
	r := runNanohost(t, "", "pipeline", "run", dot, "--answers", empty, "--logs", filepath.Join(dir, "r3"), "--json")
	if res := decodeRun(t, r); r.code != 1 || !strings.Contains(res.FailureReason, "skipped") {
		t.Errorf("empty queue: exit %d %+v", r.code, res)
	}
	// An answer that names no option: the gate asks again, and the log
	// says why, in the words every surface uses (runlog).
	again := writeFile(t, dir, "again.json", `["maybe", "A"]`)
	r = runNanohost(t, "", "pipeline", "run", dot, "--answers", again, "--logs", filepath.Join(dir, "r5"))
	for _, line := range []string{
		`! answer "maybe" at review_gate matches no option; asking again (1 of 3)`,
		`? "maybe" matches none of the options ([A] Approve, [F] Fix). Review Changes  [A] Approve  [F] Fix`,
	} {
		if r.code != 0 || !strings.Contains(r.stdout, line) {
			t.Errorf("re-ask: exit %d, output lacks %q:\n%s%s", r.code, line, r.stdout, r.stderr)
		}
	}
	// No flag: the terminal is asked (questions on stderr, answers on stdin).
	r = runNanohost(t, "F\nA\n", "pipeline", "run", dot, "--logs", filepath.Join(dir, "r4"), "--json")
	res = decodeRun(t, r)
	if !slices.Equal(res.Path, want) || !strings.Contains(r.stderr, "Review Changes") {
		t.Errorf("console: path %v stderr %q", res.Path, r.stderr)
	}
}

func TestInvestigationCircuitExample(t *testing.T) {
	root, _ := filepath.Abs("../..")
	ex := func(name string) string { return filepath.Join(root, "examples", name) }
	dir := t.TempDir()
	r := runNanohost(t, "", "pipeline", "run", ex("investigation-circuit.dot"), "--script", ex("investigation-circuit.script.json"),
		"--answers", ex("investigation-circuit.answers.json"), "--logs", filepath.Join(dir, "r1"), "--json")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	res := decodeRun(t, r)
	want := []string{"start", "recall", "triage", "resolve", "investigate", "resolve", "investigate", "correlate", "review", "approve", "report", "done"}
	if !slices.Equal(res.Path, want) {
		t.Errorf("path = %v", res.Path)
	}
	if res.Context["investigate.confidence"] != 0.9 || res.Context["correlate.shared_with"] != "33195,33201" || res.Context["human.gate.selected"] != "A" {
		t.Errorf("context = %v", res.Context)
	}

	// The investigate loop is bounded: an agent that never converges is taken
	// to review after its 3rd visit, and a person who overturns the triage at
	// the sign-off sends it back to F1.
	never := scriptFile(t, dir, "never.json", map[string][]string{
		"recall":      {answer(t, "Nothing close.", map[string]any{"match_confidence": 0.1}, "")},
		"triage":      {"[preferred_label:investigate] [outcome:success]", "environment issue [preferred_label:skip] [outcome:success]"},
		"investigate": {answer(t, "still unsure", map[string]any{"confidence": 0.4, "cause": "unknown"}, "")},
		"review":      {answer(t, "An environment issue.", map[string]any{"confidence": 0.9, "root_cause": "environment"}, "")},
	})
	answers := writeFile(t, dir, "overturn.json", `["O", "A"]`)
	res = decodeRun(t, runNanohost(t, "", "pipeline", "run", ex("investigation-circuit.dot"), "--script", never, "--answers", answers,
		"--logs", filepath.Join(dir, "r2"), "--json"))
	want = []string{"start", "recall", "triage", "resolve", "investigate", "resolve", "investigate", "resolve", "investigate",
		"review", "approve", "triage", "review", "approve", "report", "done"}
	if !slices.Equal(res.Path, want) || res.Status != "success" {
		t.Errorf("bounded loop path = %v (%s)", res.Path, res.FailureReason)
	}
	if res.Attempts["investigate"] != 3 {
		t.Errorf("investigate ran %d times", res.Attempts["investigate"])
	}
	// Every routing decision is logged with its rule and signal.
	events := readEvents(t, filepath.Join(dir, "r2", engine.EventsFile))
	var exhausted bool
	for _, e := range events {
		if e.Type == engine.EventDecision && e.Decision.From == "investigate" && e.Decision.To == "review" {
			exhausted = e.Decision.Rule == "condition" && strings.Contains(e.Decision.Values["condition"], "visit_count.investigate >= 3")
		}
	}
	if !exhausted {
		t.Error("no decision event explains the exhausted loop")
	}
}

func readEvents(t *testing.T, path string) []engine.Event {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var events []engine.Event
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var e engine.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("%s: line %d: %v", path, len(events)+1, err)
		}
		events = append(events, e)
	}
	return events
}

const crashDOT = `digraph Crash {
	graph [goal="survive a crash"]
	start [shape=Mdiamond]
	exit  [shape=Msquare]
	prepare [prompt="prepare"]
	slow    [prompt="the long middle stage"]
	finish  [prompt="finish"]
	start -> prepare -> slow -> finish -> exit
}`

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// The process is SIGKILLed in the middle of the slow node; resume completes
// the run without running the completed nodes again, and the checkpoint is
// valid JSON whenever anyone looks.
func TestPipelineRunSurvivesSIGKILLAndResumes(t *testing.T) {
	dir := t.TempDir()
	dot := writeFile(t, dir, "crash.dot", crashDOT)
	first := writeFile(t, dir, "first.json", `{"nodes": {
		"prepare": ["prepared [context:prepared.by=first-process] [outcome:success]"],
		"slow": [{"status": "success", "response": "slow done", "delay_ms": 20000}]
	}}`)
	logs := filepath.Join(dir, "run")
	cmd := exec.Command(nanohostBin, "pipeline", "run", dot, "--script", first, "--logs", logs, "--json")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()

	// Watch the checkpoint the whole time: it must always parse.
	var watchErr error
	var reads int
	stopWatch := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stopWatch:
				return
			default:
			}
			if data, err := os.ReadFile(filepath.Join(logs, engine.CheckpointFile)); err == nil {
				reads++
				var cp engine.Checkpoint
				if err := json.Unmarshal(data, &cp); err != nil && watchErr == nil {
					watchErr = fmt.Errorf("torn checkpoint (%d bytes): %v", len(data), err)
				}
			}
		}
	})

	// Kill once the slow node is at work: its StageStarted is in the trace
	// and its prompt.md, written right before the node goes to its backend,
	// is on disk.
	deadline := time.Now().Add(15 * time.Second)
	for !traceHas(filepath.Join(logs, engine.EventsFile), engine.EventStageStarted, "slow") || !fileExists(filepath.Join(logs, "slow", "prompt.md")) {
		if time.Now().After(deadline) {
			t.Fatalf("slow never started\nstdout: %s\nstderr: %s", stdout.String(), stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	killed = true
	close(stopWatch)
	wg.Wait()
	if watchErr != nil {
		t.Fatal(watchErr)
	}
	if reads == 0 {
		t.Fatal("the watcher never saw a checkpoint")
	}
	cp, err := engine.LoadCheckpoint(logs)
	if err != nil {
		t.Fatal(err)
	}
	if cp.State != engine.StateRunning || cp.CurrentNode != "prepare" || cp.NextNode != "slow" {
		t.Fatalf("checkpoint after SIGKILL: state=%s current=%s next=%s", cp.State, cp.CurrentNode, cp.NextNode)
	}

	// The resumed process gets a script in which prepare would FAIL: had it
	// run again, the run could not succeed.
	second := writeFile(t, dir, "second.json", `{"nodes": {
		"prepare": [{"status": "fail", "failure_reason": "prepare must not run twice"}],
		"slow": ["slow done after the crash [outcome:success]"]
	}}`)
	r := runNanohost(t, "", "pipeline", "resume", logs, "--script", second, "--json")
	if r.code != 0 {
		t.Fatalf("resume: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	res := decodeRun(t, r)
	if !slices.Equal(res.Path, []string{"slow", "finish", "exit"}) {
		t.Errorf("resumed path = %v", res.Path)
	}
	if res.Attempts["prepare"] != 1 || res.Attempts["slow"] != 1 || res.Context["prepared.by"] != "first-process" {
		t.Errorf("attempts %v, context %v", res.Attempts, res.Context)
	}
	if want := []string{"start", "prepare", "slow", "finish", "exit"}; !slices.Equal(res.CompletedNodes, want) {
		t.Errorf("completed = %v", res.CompletedNodes)
	}
	// The trace: prepare started once, slow twice (killed, then resumed), seq
	// strictly increasing across the two processes.
	events := readEvents(t, filepath.Join(logs, engine.EventsFile))
	starts := map[string]int{}
	for i, e := range events {
		if i > 0 && e.Seq != events[i-1].Seq+1 {
			t.Fatalf("seq %d follows %d", e.Seq, events[i-1].Seq)
		}
		if e.Type == engine.EventStageStarted {
			starts[e.NodeID]++
		}
	}
	if starts["prepare"] != 1 || starts["slow"] != 2 || starts["finish"] != 1 {
		t.Errorf("StageStarted counts = %v", starts)
	}
	if got, _ := os.ReadFile(filepath.Join(logs, "slow", "response.md")); string(got) != "slow done after the crash" {
		t.Errorf("slow response.md = %q", got)
	}
	// A finished run does not resume.
	r = runNanohost(t, "", "pipeline", "resume", logs, "--json")
	if r.code != 2 || !strings.Contains(r.stderr, "already finished") {
		t.Errorf("second resume: exit %d stderr %q", r.code, r.stderr)
	}
}

// A resumed process continues each node's scripted responses where the
// killed one left them: the engine counts executions in the checkpoint.
func TestPipelineResumeContinuesTheScript(t *testing.T) {
	dir := t.TempDir()
	dot := writeFile(t, dir, "redo.dot", `digraph Redo {
		start [shape=Mdiamond]
		exit [shape=Msquare]
		work [prompt="work"]
		review [shape=hexagon, label="Good?"]
		start -> work -> review
		review -> work [label="[R] Redo"]
		review -> exit [label="[D] Done"]
	}`)
	script := writeFile(t, dir, "s.json", `{"nodes": {"work": ["first [context:round=1] [outcome:success]", "second [context:round=2] [outcome:success]"]}}`)
	logs := filepath.Join(dir, "run")
	// No --answers: the gate asks on stdin, which never answers.
	cmd := exec.Command(nanohostBin, "pipeline", "run", dot, "--script", script, "--logs", logs, "--json")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	deadline := time.Now().Add(15 * time.Second)
	for !traceHas(filepath.Join(logs, engine.EventsFile), engine.EventInterviewStarted, "review") {
		if time.Now().After(deadline) {
			t.Fatal("the gate never asked")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	answers := writeFile(t, dir, "a.json", `["R", "D"]`)
	r := runNanohost(t, "", "pipeline", "resume", logs, "--script", script, "--answers", answers, "--json")
	res := decodeRun(t, r)
	if r.code != 0 || !slices.Equal(res.Path, []string{"review", "work", "review", "exit"}) {
		t.Fatalf("resume: exit %d %+v\n%s", r.code, res, r.stderr)
	}
	if res.Context["round"] != "2" || res.Attempts["work"] != 2 {
		t.Errorf("work's second execution answered round %v (attempts %v); want the script's second response", res.Context["round"], res.Attempts)
	}
}

func traceHas(path string, typ engine.EventType, node string) bool {
	data, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		var e engine.Event
		if json.Unmarshal([]byte(line), &e) == nil && e.Type == typ && e.NodeID == node {
			return true
		}
	}
	return false
}

// Two processes never execute one run: while `run` works in a directory, a
// `resume` of it (or another `run` into it) in a second process is refused
// naming the first one's pid; once the first dies — even by SIGKILL, with no
// chance to clean up — the kernel has dropped its lock and resume works.
func TestPipelineRunDirectoryIsExecutedByOneProcessAtATime(t *testing.T) {
	dir := t.TempDir()
	dot := writeFile(t, dir, "crash.dot", crashDOT)
	script := writeFile(t, dir, "s.json", `{"nodes": {"slow": [{"status": "success", "delay_ms": 20000}]}}`)
	logs := filepath.Join(dir, "run")
	cmd := exec.Command(nanohostBin, "pipeline", "run", dot, "--script", script, "--logs", logs, "--json")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	deadline := time.Now().Add(15 * time.Second)
	for !traceHas(filepath.Join(logs, engine.EventsFile), engine.EventStageStarted, "slow") {
		if time.Now().After(deadline) {
			t.Fatalf("slow never started: %s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cp, err := engine.LoadCheckpoint(logs)
	if err != nil {
		t.Fatal(err)
	}
	busy := fmt.Sprintf("run %s in %s is already being executed by pid %d", cp.RunID, logs, cmd.Process.Pid)
	fast := writeFile(t, dir, "fast.json", `{"default": "[outcome:success]"}`)
	if r := runNanohost(t, "", "pipeline", "resume", logs, "--script", fast, "--json"); r.code != 2 || !strings.Contains(r.stderr, busy) {
		t.Fatalf("resume while running: exit %d, stderr %q, want 2 and %q", r.code, r.stderr, busy)
	}
	if r := runNanohost(t, "", "pipeline", "run", dot, "--script", fast, "--logs", logs, "--json"); r.code != 2 || !strings.Contains(r.stderr, busy) {
		t.Fatalf("run into the running run's directory: exit %d, stderr %q", r.code, r.stderr)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	r := runNanohost(t, "", "pipeline", "resume", logs, "--script", fast, "--json")
	if res := decodeRun(t, r); r.code != 0 || res.Status != "success" {
		t.Fatalf("resume after the first process died: exit %d %+v\n%s", r.code, res, r.stderr)
	}
}

func TestPipelineResumeOfNothing(t *testing.T) {
	r := runNanohost(t, "", "pipeline", "resume", t.TempDir())
	if r.code != 2 || !strings.Contains(r.stderr, "no checkpoint") {
		t.Errorf("exit %d stderr %q", r.code, r.stderr)
	}
}

func TestPipelineRunStopsOnSIGINTAndResumes(t *testing.T) {
	dir := t.TempDir()
	dot := writeFile(t, dir, "crash.dot", crashDOT)
	script := writeFile(t, dir, "s.json", `{"nodes": {"slow": [{"status": "success", "delay_ms": 20000}, "[outcome:success]"]}}`)
	logs := filepath.Join(dir, "run")
	cmd := exec.Command(nanohostBin, "pipeline", "run", dot, "--script", script, "--logs", logs, "--json")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for !traceHas(filepath.Join(logs, engine.EventsFile), engine.EventStageStarted, "slow") {
		time.Sleep(20 * time.Millisecond)
	}
	began := time.Now()
	cmd.Process.Signal(os.Interrupt)
	err := cmd.Wait()
	if time.Since(began) > 5*time.Second {
		t.Errorf("SIGINT took %v to stop the run", time.Since(began))
	}
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit = %v\n%s", err, stderr.String())
	}
	res := decodeRun(t, cliResult{stdout: stdout.String()})
	if !res.Interrupted || res.Cancelled || res.Status != "fail" || !strings.Contains(stderr.String(), "run interrupted; continue it with: nanohost pipeline resume "+logs) {
		t.Errorf("result %+v stderr %q", res, stderr.String())
	}
	// The interrupted execution was never recorded: the same script would
	// replay its 20 s response, so the resumed process gets a fast one.
	fast := writeFile(t, dir, "fast.json", `{"default": "[outcome:success]"}`)
	r := runNanohost(t, "", "pipeline", "resume", logs, "--script", fast, "--json")
	if res := decodeRun(t, r); r.code != 0 || !slices.Equal(res.Path, []string{"slow", "finish", "exit"}) {
		t.Errorf("resume: exit %d %+v", r.code, res)
	}
}

// BenchmarkPipelineRun1000Nodes runs the real binary on a 1,000-node linear
// pipeline (sim backend, a durable journal record after every node) and
// reports the wall time per run, the process's CPU time, user and kernel,
// and this disk's floor measured right before and right after each run
// (their mean): 1,002 appends of 1.2 KB, each followed by an fdatasync
// (x-floor is the ratio).
func BenchmarkPipelineRun1000Nodes(b *testing.B) {
	const n = 1000
	dir := b.TempDir()
	dot := filepath.Join(dir, "linear.dot")
	if err := os.WriteFile(dot, []byte(linearDOT(n)), 0o644); err != nil {
		b.Fatal(err)
	}
	var user, sys, runs, floor time.Duration
	for i := 0; b.Loop(); i++ {
		// The disk's latency swings: measure the floor on both sides of the run.
		b.StopTimer()
		floor += diskFloor(b, filepath.Join(dir, fmt.Sprint("floor-before", i)), n+2) / 2
		b.StartTimer()
		cmd := exec.Command(nanohostBin, "pipeline", "run", dot, "--backend", "sim", "--logs", filepath.Join(dir, fmt.Sprint("run", i)), "--json")
		began := time.Now()
		out, err := cmd.Output()
		runs += time.Since(began)
		if err != nil {
			b.Fatalf("run: %v\n%s", err, out)
		}
		if !bytes.Contains(out, []byte(`"status": "success"`)) {
			b.Fatalf("run did not succeed: %s", out)
		}
		user += cmd.ProcessState.UserTime()
		sys += cmd.ProcessState.SystemTime()
		b.StopTimer()
		floor += diskFloor(b, filepath.Join(dir, fmt.Sprint("floor-after", i)), n+2) / 2
		b.StartTimer()
	}
	b.ReportMetric(float64(runs.Milliseconds())/float64(b.N), "ms/run")
	b.ReportMetric(float64(floor.Milliseconds())/float64(b.N), "floor-ms/run")
	b.ReportMetric(float64(runs)/float64(floor), "x-floor")
	b.ReportMetric(float64(user.Milliseconds())/float64(b.N), "user-ms/run")
	b.ReportMetric(float64(sys.Milliseconds())/float64(b.N), "sys-ms/run")
}

// diskFloor appends n records of 1.2 KB to a new file at path, each
// followed by an fdatasync, and returns how long that took.
func diskFloor(b *testing.B, path string, n int) time.Duration {
	rec := append(bytes.Repeat([]byte("x"), 1199), '\n')
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	began := time.Now()
	for range n {
		if _, err := f.Write(rec); err != nil {
			b.Fatal(err)
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(began)
}

// slowDOT's build stage is retried once, then takes a while: the live log
// shows the attempt and the duration, and how the long stage is getting on.
const slowDOT = `digraph Slow {
  graph [goal="Try it"]
  start [shape=Mdiamond]
  plan [prompt="plan"]
  build [prompt="build", max_retries=2]
  done [shape=Msquare]
  start -> plan -> build -> done
  build -> plan [condition="outcome=partial_success"]
}`

const slowScript = `{"nodes": {"build": [{"response": "[outcome:retry]"}, {"response": "[outcome:success]", "delay_ms": 2600}]}}`

// Piped, the live log is plain: attempts and durations on the stage lines,
// and a "still running" line while a stage takes longer than
// --progress-every without a line.
func TestPipelineRunLiveLogShowsAttemptsAndProgressWhenPiped(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "slow.dot", slowDOT)
	writeFile(t, dir, "slow.json", slowScript)
	r := runNanohostIn(t, dir, "pipeline", "run", "slow.dot", "--script", "slow.json", "--no-backoff", "--progress-every", "500ms")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{`\n  ✗ build — the agent reported retry \(attempt 1/3\)\n`, `\n  ↻ Retry: build \(2/3\)`,
		`\n  … build \(2/3\) running \d+(ms|s) · 1 of 3 stages done · \d+s in all\n`, `\n  ✓ build — \ds \(attempt 2\)\n`, `\n✓ Pipeline complete — `} {
		if !regexp.MustCompile(want).MatchString(r.stdout) {
			t.Errorf("live log lacks %s:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, ansiEscape) || strings.Contains(r.stdout, "\r") {
		t.Errorf("piped live log has terminal control codes:\n%q", r.stdout)
	}
	quiet := runNanohostIn(t, dir, "pipeline", "run", "slow.dot", "--script", "slow.json", "--no-backoff", "--progress-every", "0")
	if strings.Contains(quiet.stdout, "running") {
		t.Errorf("--progress-every 0 still printed progress:\n%s", quiet.stdout)
	}
}

// With --data the run is recorded in that host data directory's database
// as it goes: `nanohost runs` lists it and shows its path; stopped with
// Ctrl-C it is interrupted there, and `pipeline resume --data` continues
// the same record to its end. Without --data no database is created.
func TestPipelineRunRecordsTheRunWithData(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "slow.dot", slowDOT)
	writeFile(t, dir, "slow.json", `{"nodes": {"build": [{"response": "[outcome:success]", "delay_ms": 60000}]}}`)
	cmd := exec.Command(nanohostBin, "pipeline", "run", "slow.dot", "--script", "slow.json", "--data", "hostdata")
	cmd.Dir = dir
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	var runID string
	for sc.Scan() {
		line := sc.Text()
		if runID == "" {
			runID = strings.Fields(line)[1]
		}
		if strings.Contains(line, "→ build") {
			break
		}
	}
	db := filepath.Join(dir, "hostdata", "nanohost.db")
	if r := runNanohostIn(t, dir, "runs", "show", runID, "--db", db); !strings.Contains(r.stdout, "running") || !strings.Contains(r.stdout, "✓ plan") {
		t.Errorf("runs show while it runs:\n%s%s", r.stdout, r.stderr)
	}
	_ = cmd.Process.Signal(os.Interrupt)
	_ = cmd.Wait()
	if r := runNanohostIn(t, dir, "runs", "list", "--db", db); !strings.Contains(r.stdout, runID) || !strings.Contains(r.stdout, "interrupted") || !strings.Contains(r.stdout, "cli") {
		t.Errorf("runs list after Ctrl-C:\n%s%s", r.stdout, r.stderr)
	}
	logs := filepath.Join("hostdata", "runs", runID)
	writeFile(t, dir, "fast.json", `{"default": "[outcome:success]"}`)
	r := runNanohostIn(t, dir, "pipeline", "resume", logs, "--script", "fast.json", "--data", "hostdata")
	if r.code != 0 {
		t.Fatalf("resume: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runNanohostIn(t, dir, "runs", "show", runID, "--db", db, "--json")
	var shown struct {
		Run    runs.Run `json:"run"`
		Events int      `json:"events"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &shown); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	if shown.Run.Status != runs.Succeeded || shown.Run.ChatID != runs.TerminalChat || shown.Run.FileName != "slow.dot" ||
		shown.Run.Goal != "Try it" || shown.Events == 0 || int64(shown.Events) != shown.Run.LastSeq {
		t.Errorf("recorded run after the resume: %+v (%d events)", shown.Run, shown.Events)
	}

	plain := t.TempDir()
	writeFile(t, plain, "slow.dot", slowDOT)
	if r := runNanohostIn(t, plain, "pipeline", "run", "slow.dot", "--backend", "sim"); r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(plain, "data", "nanohost.db")); err == nil {
		t.Error("a run without --data created a database")
	}
}
