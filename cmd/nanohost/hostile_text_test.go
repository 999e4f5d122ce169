//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nanohost/internal/config"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/frontend"
	"nanohost/internal/runs"
	"nanohost/internal/store"
)

// hostile is what an agent writes to take over the operator's terminal:
// retitle the window, clear the screen, recolour it, and a bidi override
// that makes a name read backwards.
const hostile = "\x1b]0;pwned\a\x1b[2J\x1b[31m\x01evil\u202etxt.exe"

// hostileShown is hostile as nanohost must print it.
const hostileShown = `\x1b]0;pwned\x07\x1b[2J\x1b[31m\x01evil\u202etxt.exe`

// assertNothingDrivesTheTerminal fails when out holds any of hostile's
// controls raw (nanohost's own colours, "\x1b[…m" around its words, may be
// there on a terminal) and when the escaped text is not shown.
func assertNothingDrivesTheTerminal(t *testing.T, what, out string) {
	t.Helper()
	for _, raw := range []string{"\x1b]", "\x1b[2J", "\a", "\x01", "\u202e", "\x1b[31m\x01"} {
		if strings.Contains(out, raw) {
			t.Errorf("%s prints %q raw:\n%q", what, raw, out)
		}
	}
	if !strings.Contains(out, `\x1b]0;pwned\`) {
		t.Errorf("%s does not show the escaped text %q:\n%q", what, hostileShown, out)
	}
}

// hostileRunDB is a host's data directory after a run whose stage named a
// file with escape codes, wrote escape codes into it, and answered with
// them; the stage's label holds them too.
func hostileRunDB(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	folder := filepath.Join(dir, "data", "groups", "main")
	if err := os.MkdirAll(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	ws, tree := openTestBranch(t, dir, "run-hostile", folder)
	backend := ws.Wrap(engine.BackendFunc(func(context.Context, engine.Request) (engine.Result, error) {
		if err := os.WriteFile(filepath.Join(tree, "x"+hostile), []byte("line "+hostile+"\n"), 0o644); err != nil {
			t.Error(err)
		}
		return engine.Result{Text: hostile + " [outcome:success]"}, nil
	}))
	src := []byte("digraph Hostile {\n start [shape=Mdiamond]\n work [label=\"" + hostile + "\", prompt=\"work\"]\n" +
		" exit [shape=Msquare]\n start -> work -> exit\n}\n")
	g, _, err := frontend.Prepare("hostile.dot", src, frontend.Options{})
	if err != nil {
		t.Fatal(err)
	}
	logs := filepath.Join(dir, "data", "runs", "run-hostile")
	var events []engine.Event
	res, err := engine.New(engine.Config{Backend: backend, LogsRoot: logs, RunID: "run-hostile", NoFsync: true,
		Observers: []engine.Observer{engine.ObserverFunc(func(e engine.Event) { events = append(events, e) })}}).Run(context.Background(), g, src, "hostile.dot")
	if err != nil || res.Status != engine.StateSuccess {
		t.Fatalf("run: %v %+v", err, res)
	}
	ctx := context.Background()
	st, err := store.Open(ctx, dbOf(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.CreateRun(ctx, runs.Run{ID: "run-hostile", GroupFolder: "main", ChatID: "C1", SourceDOT: string(src),
		Status: runs.Failed, FailureReason: hostile, LogsRoot: logs}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AppendEvents(ctx, events); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestAgentTextCannotDriveTheTerminal: text an agent controls — a file's
// name and content, its answer, a stage label, a failure reason — is shown
// escaped by `runs show --changes`, `runs show`, `runs events` and the live
// log of `pipeline run`, on a terminal and piped. (The console's half is
// internal/host's test of the same name.)
func TestAgentTextCannotDriveTheTerminal(t *testing.T) {
	dir := hostileRunDB(t)
	db := dbOf(t, dir)
	for _, args := range [][]string{
		{"runs", "show", "run-hostile", "--changes", "--db", db},
		{"runs", "show", "run-hostile", "--db", db},
		{"runs", "events", "run-hostile", "--db", db},
	} {
		piped := runNanohostIn(t, dir, args...)
		if piped.code != 0 {
			t.Fatalf("%v: exit %d %s", args, piped.code, piped.stderr)
		}
		assertNothingDrivesTheTerminal(t, strings.Join(args[:3], " ")+" (piped)", piped.stdout+piped.stderr)
		tty := runOnTerminal(t, nil, args...)
		if tty.code != 0 {
			t.Fatalf("%v on a terminal: exit %d %s", args, tty.code, tty.stdout)
		}
		assertNothingDrivesTheTerminal(t, strings.Join(args[:3], " ")+" (terminal)", tty.stdout)
	}

	// The live log: the pipeline's goal and a stage's label are the
	// agent's (start_pipeline), and so is the answer it fails with.
	work := t.TempDir()
	dot := writeFile(t, work, "hostile.dot", "digraph Hostile {\n graph [goal=\""+hostile+"\"]\n start [shape=Mdiamond]\n"+
		" work [label=\""+hostile+"\", prompt=\"work\"]\n exit [shape=Msquare]\n start -> work -> exit\n}\n")
	answers, _ := json.Marshal(map[string]any{"nodes": map[string][]string{"work": {hostile + " [outcome:fail]"}}})
	script := writeFile(t, work, "hostile.json", string(answers))
	piped := runNanohost(t, "", "pipeline", "run", dot, "--script", script, "--logs", filepath.Join(work, "r1"))
	assertNothingDrivesTheTerminal(t, "pipeline run (piped)", piped.stdout+piped.stderr)
	tty := runOnTerminal(t, nil, "pipeline", "run", dot, "--script", script, "--logs", filepath.Join(work, "r2"))
	assertNothingDrivesTheTerminal(t, "pipeline run (terminal)", tty.stdout)
	if !strings.Contains(piped.stdout+piped.stderr, "Pipeline failed") {
		t.Errorf("the live log does not tell the run failed:\n%s%s", piped.stdout, piped.stderr)
	}

	// The host's log in text format, with agent text as message, value and error.
	var log bytes.Buffer
	newLogger(config.Log{Format: "text", Level: "info"}, &log).Warn("agent said "+hostile, "reply", hostile, "err", errors.New(hostile))
	assertNothingDrivesTheTerminal(t, "the text log", log.String())
}
