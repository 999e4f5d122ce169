package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"nanohost/internal/lease"
	"nanohost/internal/store/storetest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runs"
	"nanohost/internal/store"
)

// storeEnv points the CLI at the database hostDB filled for dir: with
// NANOHOST_TEST_STORE=postgres a PostgreSQL database, else (nothing to
// add) dir's SQLite file.
func storeEnv(dir string) []string {
	if u, ok := storetest.Known(dir); ok {
		return []string{"NANOHOST_STORE_URL=" + u}
	}
	return nil
}

// runNanohostIn runs the built binary in dir (TZ=UTC, so times are stable).
func runNanohostIn(t *testing.T, dir string, args ...string) cliResult {
	t.Helper()
	cmd := exec.Command(nanohostBin, args...)
	cmd.Dir = dir
	cmd.Env = append(append(cmd.Environ(), "TZ=UTC"), storeEnv(dir)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run nanohost %v: %v", args, err)
	}
	return cliResult{stdout.String(), stderr.String(), code}
}

var t0 = time.Date(2026, 2, 28, 10, 0, 0, 0, time.UTC)

// dbOf is where the host serving from dir/data keeps its database: the
// SQLite file, or with NANOHOST_TEST_STORE=postgres a PostgreSQL database
// (which runNanohostIn points the CLI at).
func dbOf(t *testing.T, dir string) string {
	if u, ok := storetest.PostgresFor(t, dir); ok {
		return u
	}
	return filepath.Join(dir, "data", "nanohost.db")
}

// hostDB is a database as a running host leaves it, in dir/data/nanohost.db:
// a finished run with retries and a gate, a failed one, a running one.
func hostDB(t *testing.T) (dir string, st *store.Store) {
	t.Helper()
	dir = t.TempDir()
	ctx := context.Background()
	st, err := store.Open(ctx, dbOf(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })

	mustCreate := func(r runs.Run) {
		if err := st.CreateRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	mustCreate(runs.Run{ID: "run-feature", GroupFolder: "main", ChatID: "C1", SourceDOT: "digraph Feature {}",
		FileName: "feature.dot", Goal: "Add RSI indicator", Status: runs.Running, CreatedAt: t0, StartedBy: "U42",
		LogsRoot: "/data/pipelines/run-feature"})
	mustCreate(runs.Run{ID: "run-broken", GroupFolder: "ops", ChatID: "C2", SourceDOT: "digraph B {}",
		Goal: "Fix the deploy", Status: runs.Running, CreatedAt: t0.Add(time.Hour)})
	mustCreate(runs.Run{ID: "run-live", GroupFolder: "main", ChatID: "C1", SourceDOT: "digraph L {}",
		Goal: "Long job", Status: runs.Running, CreatedAt: t0.Add(2 * time.Hour)})

	u := func(cost float64) *engine.Usage {
		return &engine.Usage{InputTokens: 1000, OutputTokens: 200, CostUSD: cost}
	}
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	events := []engine.Event{
		{Seq: 1, Time: at(0), Type: engine.EventPipelineStarted, Label: "Feature", Message: "Add RSI indicator"},
		{Seq: 2, Time: at(1), Type: engine.EventStageStarted, NodeID: "plan", Label: "Plan", Index: 1, Total: 3},
		{Seq: 3, Time: at(46), Type: engine.EventStageCompleted, NodeID: "plan", Label: "Plan", Index: 1, Total: 3, Status: engine.StatusSuccess, Duration: 45 * time.Second, Usage: u(0.10)},
		{Seq: 4, Time: at(47), Type: engine.EventStageStarted, NodeID: "test", Label: "Run tests", Index: 2, Total: 3},
		{Seq: 5, Time: at(50), Type: engine.EventStageFailed, NodeID: "test", Label: "Run tests", Status: engine.StatusFail, Duration: 3 * time.Second, Message: "2 failures", WillRetry: true, Attempt: 1, MaxAttempt: 3, Usage: u(0.05)},
		{Seq: 6, Time: at(50), Type: engine.EventStageRetrying, NodeID: "test", Label: "Run tests", Attempt: 2, MaxAttempt: 3, Delay: 200 * time.Millisecond},
		{Seq: 7, Time: at(51), Type: engine.EventStageStarted, NodeID: "test", Label: "Run tests", Index: 2, Total: 3},
		{Seq: 8, Time: at(59), Type: engine.EventStageCompleted, NodeID: "test", Label: "Run tests", Status: engine.StatusSuccess, Duration: 8 * time.Second, Usage: u(0.07)},
		{Seq: 9, Time: at(60), Type: engine.EventDecision, NodeID: "test", Decision: &engine.Decision{From: "test", To: "review", Rule: "condition"}},
		{Seq: 10, Time: at(60), Type: engine.EventStageStarted, NodeID: "review", Label: "Review", Index: 3, Total: 3},
		{Seq: 11, Time: at(61), Type: engine.EventInterviewStarted, NodeID: "review", Question: &engine.Question{ID: "review-1", Text: "Ship it?"}},
		{Seq: 12, Time: at(90), Type: engine.EventInterviewCompleted, NodeID: "review", Answer: &engine.Answer{Value: "A", By: "U7"}},
		{Seq: 13, Time: at(90), Type: engine.EventStageCompleted, NodeID: "review", Label: "Review", Status: engine.StatusSuccess, Duration: 30 * time.Second},
		{Seq: 14, Time: at(91), Type: engine.EventPipelineCompleted, Duration: 91 * time.Second},
	}
	for i := range events {
		events[i].RunID = "run-feature"
	}
	if _, err := st.AppendEvents(ctx, events); err != nil {
		t.Fatal(err)
	}
	g, _, err := st.OpenGate(ctx, runs.Gate{RunID: "run-feature", GateID: "review-1", NodeID: "review", Text: "Ship it?", AskedAt: at(61),
		Choices: []engine.Option{{Key: "A", Label: "[A] Approve", To: "ship"}}})
	if err != nil {
		t.Fatal(err)
	}
	st.AnswerGate(ctx, "run-feature", "review-1", g.Nonce, 1, "A", "U7")
	st.SetDelivered(ctx, "run-feature", 12)
	if err := st.FinishRun(ctx, "run-feature", runs.Succeeded, "", engine.Usage{InputTokens: 3000, OutputTokens: 600, CostUSD: 0.22}); err != nil {
		t.Fatal(err)
	}
	if err := st.FinishRun(ctx, "run-broken", runs.Failed, "tests failed 3 times", engine.Usage{CostUSD: 1.5}); err != nil {
		t.Fatal(err)
	}
	st.AppendEvent(ctx, engine.Event{RunID: "run-live", Seq: 1, Time: at(7200), Type: engine.EventPipelineStarted, Label: "Long"})
	return dir, st
}

func TestRunsWithoutDatabase(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{{"runs", "list"}, {"runs", "show", "x"}, {"runs", "events", "x"}} {
		r := runNanohostIn(t, dir, args...)
		want := "no database at data/nanohost.db — start the host with `nanohost serve` first or pass --db"
		if r.code != 1 || !strings.Contains(r.stderr, want) {
			t.Errorf("%v: exit %d, stderr %q; want 1 and %q", args, r.code, r.stderr, want)
		}
	}
	r := runNanohostIn(t, dir, "runs", "list", "--db", "elsewhere/x.db")
	if r.code != 1 || !strings.Contains(r.stderr, "no database at elsewhere/x.db") {
		t.Errorf("--db missing: exit %d, %q", r.code, r.stderr)
	}
	if matches, _ := filepath.Glob(filepath.Join(dir, "*")); len(matches) != 0 {
		t.Errorf("reading commands created files: %v", matches)
	}
}

func TestRunsList(t *testing.T) {
	dir, _ := hostDB(t)
	r := runNanohostIn(t, dir, "runs", "list")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "RUN") {
		t.Fatalf("want a header and 3 runs:\n%s", r.stdout)
	}
	for i, want := range [][]string{
		{"run-live", "running", "main", "2026-02-28 12:00", "Long job"},
		{"run-broken", "fail", "ops", "$1.50", "Fix the deploy"},
		{"run-feature", "succeeded", "main", "2026-02-28 10:00", "$0.22", "Add RSI indicator (feature.dot)"},
	} {
		for _, field := range want {
			if !strings.Contains(lines[i+1], field) {
				t.Errorf("row %d %q lacks %q", i+1, lines[i+1], field)
			}
		}
	}

	r = runNanohostIn(t, dir, "runs", "list", "--status", "success,fail", "--group", "main")
	if r.code != 0 || !strings.Contains(r.stdout, "run-feature") || strings.Contains(r.stdout, "run-broken") || strings.Contains(r.stdout, "run-live") {
		t.Errorf("filtered list:\n%s%s", r.stdout, r.stderr)
	}

	r = runNanohostIn(t, dir, "runs", "list", "--limit", "1")
	if !strings.Contains(r.stdout, "run-live") || strings.Contains(r.stdout, "run-broken") || !strings.Contains(r.stderr, "--limit") {
		t.Errorf("--limit 1: stdout %q stderr %q; want the newest run and a hint that more exist", r.stdout, r.stderr)
	}

	r = runNanohostIn(t, dir, "runs", "list", "--json", "--status", "fail")
	var page runs.Page
	if err := json.Unmarshal([]byte(r.stdout), &page); err != nil {
		t.Fatalf("--json output: %v\n%s", err, r.stdout)
	}
	if len(page.Runs) != 1 || page.Runs[0].FailureReason != "tests failed 3 times" || page.Runs[0].Usage.CostUSD != 1.5 {
		t.Errorf("--json runs = %+v", page.Runs)
	}

	r = runNanohostIn(t, dir, "runs", "list", "--group", "nobody")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "no runs" {
		t.Errorf("empty list: %q", r.stdout)
	}
	r = runNanohostIn(t, dir, "runs", "list", "--group", "nobody", "--json")
	if !strings.Contains(r.stdout, `"runs": []`) {
		t.Errorf("empty --json list: %q", r.stdout)
	}
}

func TestRunsListBadFlags(t *testing.T) {
	dir, _ := hostDB(t)
	r := runNanohostIn(t, dir, "runs", "list", "--status", "done")
	if r.code != 2 || !strings.Contains(r.stderr, `unknown run state "done"`) || !strings.Contains(r.stderr, "waiting") {
		t.Errorf("bad --status: exit %d, %q", r.code, r.stderr)
	}
	r = runNanohostIn(t, dir, "runs", "list", "--limit", "0")
	if r.code != 2 || !strings.Contains(r.stderr, "want 1 to 1000") {
		t.Errorf("bad --limit: exit %d, %q", r.code, r.stderr)
	}
}

func TestRunsShow(t *testing.T) {
	dir, _ := hostDB(t)
	r := runNanohostIn(t, dir, "runs", "show", "run-feature")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	flat := squeezeSpaces(r.stdout)
	for _, want := range []string{
		"Run run-feature",
		"Status succeeded",
		"Pipeline Add RSI indicator (feature.dot)",
		"Where group main, chat C1",
		"Started 2026-02-28 10:00:00 by U42",
		"Cost $0.2200 (3000 input / 600 output tokens)",
		"Logs /data/pipelines/run-feature",
		"Events 14 (delivered to chat up to seq 12)",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("show lacks %q:\n%s", want, r.stdout)
		}
	}
	// The path, in order: plan, the failed test, its retry, the passing
	// test, the review with its question and answer.
	path := r.stdout[strings.Index(r.stdout, "\nPath"):]
	order := []string{"✓ plan", "45s", "✗ test", "fail 2 failures", "↻ test", "attempt 2/3", "✓ test", "8s",
		"? review", "Ship it?", "! review", `"A" by U7`, "✓ review", "30s"}
	rest := path
	for _, want := range order {
		i := strings.Index(rest, want)
		if i < 0 {
			t.Fatalf("path lacks %q (or it is out of order):\n%s", want, path)
		}
		rest = rest[i+len(want):]
	}
	if !strings.Contains(r.stdout, "Gates") || !strings.Contains(r.stdout, `answered [A] Approve by U7`) {
		t.Errorf("gates missing:\n%s", r.stdout)
	}

	r = runNanohostIn(t, dir, "runs", "show", "run-broken")
	if !strings.Contains(r.stdout, "failed — tests failed 3 times") || !strings.Contains(r.stdout, "(no stage has run)") {
		t.Errorf("failed run:\n%s", r.stdout)
	}
}

func squeezeSpaces(s string) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		lines = append(lines, strings.Join(strings.Fields(l), " "))
	}
	return strings.Join(lines, "\n")
}

func TestRunsShowRunningCostsSoFar(t *testing.T) {
	dir, st := hostDB(t)
	ctx := context.Background()
	st.AppendEvent(ctx, engine.Event{RunID: "run-live", Seq: 2, Type: engine.EventStageStarted, NodeID: "build"})
	st.AppendEvent(ctx, engine.Event{RunID: "run-live", Seq: 3, Type: engine.EventStageCompleted, NodeID: "build",
		Status: engine.StatusSuccess, Usage: &engine.Usage{InputTokens: 10, OutputTokens: 5, CostUSD: 0.03}})
	st.AppendEvent(ctx, engine.Event{RunID: "run-live", Seq: 4, Type: engine.EventStageStarted, NodeID: "deploy"})
	r := runNanohostIn(t, dir, "runs", "show", "run-live")
	for _, want := range []string{"$0.0300 (10 input / 5 output tokens) so far", "✓ build", "→ deploy", "Running for"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("show of a running run lacks %q:\n%s", want, r.stdout)
		}
	}
}

func TestRunsShowJSON(t *testing.T) {
	dir, _ := hostDB(t)
	r := runNanohostIn(t, dir, "runs", "show", "run-feature", "--json")
	var out struct {
		Run    runs.Run    `json:"run"`
		Path   []pathStep  `json:"path"`
		Gates  []runs.Gate `json:"gates"`
		Events int         `json:"events"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("%v\n%s", err, r.stdout)
	}
	if out.Run.SourceDOT != "digraph Feature {}" || out.Events != 14 || len(out.Gates) != 1 || len(out.Path) != 7 {
		t.Errorf("show --json: run dot %q, %d events, %d gates, %d path steps", out.Run.SourceDOT, out.Events, len(out.Gates), len(out.Path))
	}
	if len(out.Path) > 1 && out.Path[1].Kind != "failed" || out.Path[1].Detail != "2 failures" {
		t.Errorf("second step %+v, want the failed test", out.Path[1])
	}
}

func TestRunsUnknownRun(t *testing.T) {
	dir, _ := hostDB(t)
	for _, sub := range []string{"show", "events"} {
		r := runNanohostIn(t, dir, "runs", sub, "run-nope")
		if r.code != 1 || !strings.Contains(r.stderr, `no run "run-nope"`) || !strings.Contains(r.stderr, "nanohost runs list") {
			t.Errorf("%s unknown run: exit %d, %q", sub, r.code, r.stderr)
		}
	}
}

func TestRunsEvents(t *testing.T) {
	dir, _ := hostDB(t)
	r := runNanohostIn(t, dir, "runs", "events", "run-feature")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 14 {
		t.Fatalf("%d lines, want 14:\n%s", len(lines), r.stdout)
	}
	for i, want := range map[int][]string{
		0: {"1", "10:00:00.000", "PipelineStarted", "[Pipeline] Feature: Add RSI indicator"},
		4: {"5", "StageFailed", "test", "2 failures"},
		8: {"9", "Decision", "review"},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i], w) {
				t.Errorf("line %d %q lacks %q", i+1, lines[i], w)
			}
		}
	}

	r = runNanohostIn(t, dir, "runs", "events", "run-feature", "--after", "12", "--json")
	var seqs []int64
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	for sc.Scan() {
		var e engine.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("line %q is not an event: %v", sc.Text(), err)
		}
		seqs = append(seqs, e.Seq)
	}
	if len(seqs) != 2 || seqs[0] != 13 || seqs[1] != 14 {
		t.Errorf("--after 12 --json seqs = %v, want [13 14] as NDJSON", seqs)
	}
	r = runNanohostIn(t, dir, "runs", "events", "run-feature", "--after", "-1")
	if r.code != 2 {
		t.Errorf("--after -1: exit %d", r.code)
	}
}

// TestRunsEventsFollow tails a live run: events appended while it polls
// are printed, and it exits by itself once the run finishes.
func TestRunsEventsFollow(t *testing.T) {
	dir, st := hostDB(t)
	ctx := context.Background()
	cmd := exec.Command(nanohostBin, "runs", "events", "run-live", "--follow", "--json", "--interval", "20ms")
	cmd.Dir = dir
	cmd.Env = append(cmd.Environ(), storeEnv(dir)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	lines := make(chan engine.Event, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var e engine.Event
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				lines <- e
			}
		}
		close(lines)
		done <- cmd.Wait()
	}()
	next := func() engine.Event {
		t.Helper()
		select {
		case e, ok := <-lines:
			if !ok {
				t.Fatalf("follow ended early; stderr %s", stderr.String())
			}
			return e
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Fatal("no event within 10s")
		}
		return engine.Event{}
	}
	if e := next(); e.Seq != 1 {
		t.Fatalf("first event seq %d", e.Seq)
	}
	for seq := int64(2); seq <= 4; seq++ {
		if _, err := st.AppendEvent(ctx, engine.Event{RunID: "run-live", Seq: seq, Type: engine.EventStageStarted, NodeID: "n"}); err != nil {
			t.Fatal(err)
		}
		if e := next(); e.Seq != seq {
			t.Fatalf("followed event seq %d, want %d", e.Seq, seq)
		}
	}
	// The last event and the finish land together; follow prints the event, then stops.
	st.AppendEvent(ctx, engine.Event{RunID: "run-live", Seq: 5, Type: engine.EventPipelineCompleted})
	st.FinishRun(ctx, "run-live", runs.Succeeded, "", engine.Usage{})
	if e := next(); e.Seq != 5 {
		t.Fatalf("last event seq %d", e.Seq)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("follow exited with %v: %s", err, stderr.String())
		}
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("--follow did not stop after the run finished")
	}
}

func TestRunsHelp(t *testing.T) {
	for _, sub := range []string{"list", "show", "events"} {
		r := runNanohostIn(t, t.TempDir(), "runs", sub, "--help")
		if r.code != 0 || !strings.Contains(r.stdout, "Examples:") || !strings.Contains(r.stdout, "--db") {
			t.Errorf("runs %s --help: exit %d\n%s", sub, r.code, r.stdout)
		}
	}
}

// A run is named on the command line as in chat: its id, or the start of
// it that only one run has; a start several runs share lists them.
func TestRunsShowTakesTheStartOfAnID(t *testing.T) {
	dir, _ := hostDB(t)
	r := runNanohostIn(t, dir, "runs", "show", "run-feat")
	if r.code != 0 || !strings.Contains(squeezeSpaces(r.stdout), "Run run-feature") || !strings.Contains(r.stdout, "✓ plan") {
		t.Errorf("runs show run-feat: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runNanohostIn(t, dir, "runs", "events", "RUN-LIVE")
	if r.code != 0 || !strings.Contains(r.stdout, "PipelineStarted") {
		t.Errorf("runs events RUN-LIVE: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runNanohostIn(t, dir, "runs", "show", "run-")
	if r.code == 0 || !strings.Contains(r.stderr, "more than one run matches run-: ") || !strings.Contains(r.stderr, "run-feature") {
		t.Errorf("runs show run-: exit %d; want a refusal naming the runs\n%s", r.code, r.stderr)
	}
	r = runNanohostIn(t, dir, "runs", "show", "nope")
	if r.code == 0 || !strings.Contains(r.stderr, `no run "nope"`) {
		t.Errorf("runs show nope: exit %d\n%s", r.code, r.stderr)
	}
}

// On PostgreSQL shared by replicas, the list names the replica driving
// each unfinished run, "-" for none.
func TestRunsListShowsTheOwningReplica(t *testing.T) {
	dir := t.TempDir()
	url := storetest.PostgresURL(t)
	ctx := context.Background()
	st, err := store.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, id := range []string{"run-driven", "run-orphan"} {
		if err := st.CreateRun(ctx, runs.Run{ID: id, GroupFolder: "main", ChatID: "C1", SourceDOT: "digraph G {}", CreatedAt: t0}); err != nil {
			t.Fatal(err)
		}
	}
	if holder, err := st.TakeLease(ctx, lease.ID{Kind: lease.Run, Key: "run-driven"}, "replica-b", time.Minute); err != nil || holder != "replica-b" {
		t.Fatalf("take lease: %v %v", holder, err)
	}
	r := runNanohostIn(t, dir, "runs", "list", "--db", url)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	fields := map[string][]string{}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	for _, l := range lines {
		f := strings.Fields(l)
		fields[f[0]] = f
	}
	if h := fields["RUN"]; len(h) < 4 || h[3] != "OWNER" {
		t.Fatalf("header %q, want RUN STATUS GROUP OWNER …:\n%s", lines[0], r.stdout)
	}
	if got := fields["run-driven"][3]; got != "replica-b" {
		t.Errorf("run-driven's owner column %q, want replica-b:\n%s", got, r.stdout)
	}
	if got := fields["run-orphan"][3]; got != "-" {
		t.Errorf("run-orphan's owner column %q, want - (no replica drives it):\n%s", got, r.stdout)
	}
	r = runNanohostIn(t, dir, "runs", "list", "--db", url, "--json")
	var page runs.Page
	if err := json.Unmarshal([]byte(r.stdout), &page); err != nil || len(page.Runs) != 2 {
		t.Fatalf("--json: %v\n%s", err, r.stdout)
	}
	for _, run := range page.Runs {
		if want := map[string]string{"run-driven": "replica-b"}[run.ID]; run.Owner != want {
			t.Errorf("--json %s owner %q, want %q", run.ID, run.Owner, want)
		}
	}
}
