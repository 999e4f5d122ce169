package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/frontend"
	"nanohost/internal/runs"
	"nanohost/internal/store"
	gitws "nanohost/internal/workspace"
)

// openTestBranch gives run runID its branch and working tree over the group
// folder folder, as the host does, in dir's data/state.
func openTestBranch(t *testing.T, dir, runID, folder string) (*gitws.Run, string) {
	t.Helper()
	m, err := gitws.New(gitws.Options{StateDir: filepath.Join(dir, "data", "state", "workspaces"), TreesDir: filepath.Join(dir, "data", "worktrees")})
	if err != nil {
		t.Fatal(err)
	}
	ws, err := m.Open(context.Background(), runID, gitws.Source{Name: "main", Folder: folder})
	if err != nil {
		t.Fatal(err)
	}
	return ws, ws.Dir
}

// changesDB is a host's database and run directory after a run whose
// implement stage changed the workspace twice (it was sent back once).
func changesDB(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	folder := filepath.Join(dir, "data", "groups", "main")
	if err := os.MkdirAll(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(folder, "README.md"), []byte("# App\n"), 0o644)
	ws, tree := openTestBranch(t, dir, "run-changes", folder)
	visits := 0
	backend := ws.Wrap(engine.BackendFunc(func(_ context.Context, req engine.Request) (engine.Result, error) {
		if req.NodeID == "implement" {
			visits++
			if visits == 1 {
				os.WriteFile(filepath.Join(tree, "app.go"), []byte("package app\n\nfunc Run() {}\n"), 0o644)
				os.WriteFile(filepath.Join(tree, "README.md"), []byte("# App\n\nRuns.\n"), 0o644)
				return engine.Result{Text: "first try [context:again=yes] [outcome:success]"}, nil
			}
			os.WriteFile(filepath.Join(tree, "app.go"), []byte("package app\n\nfunc Run() error { return nil }\n"), 0o644)
		}
		return engine.Result{Text: "ok [context:again=no] [outcome:success]"}, nil
	}))
	src := []byte(`digraph Twice {
		start [shape=Mdiamond]
		implement [prompt="implement"]
		check [shape=diamond]
		exit [shape=Msquare]
		start -> implement -> check
		check -> implement [condition="context.again=yes"]
		check -> exit
	}`)
	g, _, err := frontend.Prepare("twice.dot", src, frontend.Options{})
	if err != nil {
		t.Fatal(err)
	}
	logs := filepath.Join(dir, "data", "runs", "run-changes")
	var events []engine.Event
	res, err := engine.New(engine.Config{Backend: backend, LogsRoot: logs, RunID: "run-changes", NoFsync: true,
		Observers: []engine.Observer{engine.ObserverFunc(func(e engine.Event) { events = append(events, e) })}}).Run(context.Background(), g, src, "twice.dot")
	if err != nil || res.Status != engine.StateSuccess {
		t.Fatalf("run: %v %+v", err, res)
	}
	ctx := context.Background()
	st, err := store.Open(ctx, dbOf(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.CreateRun(ctx, runs.Run{ID: "run-changes", GroupFolder: "main", ChatID: "C1", SourceDOT: string(src),
		Status: runs.Running, LogsRoot: logs}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AppendEvents(ctx, events); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestRunsShowChanges(t *testing.T) {
	dir := changesDB(t)
	r := runNanohostIn(t, dir, "runs", "show", "run-changes", "--changes")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	flat := squeezeSpaces(r.stdout)
	for _, want := range []string{
		"Changes since the run started: 2 files (+5 −0)",
		"M README.md +2 −0 13 B",
		"A app.go +3 −0 45 B",
		"By stage",
		"implement visit 1 changed 2 files (+5 −0)",
		"implement visit 2 changed 1 file (+1 −1)",
		"diff --git a/app.go b/app.go\nnew file mode 100644",
		"+func Run() error { return nil }",
	} {
		if !strings.Contains(flat, want) && !strings.Contains(r.stdout, want) {
			t.Errorf("--changes lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "\x1b[") {
		t.Error("colours when stdout is not a terminal")
	}

	r = runNanohostIn(t, dir, "runs", "show", "run-changes", "--changes", "implement")
	if r.code != 0 || !strings.Contains(r.stdout, "Changes of implement (visit 2): 1 file (+1 −1)") ||
		!strings.Contains(r.stdout, "-func Run() {}\n+func Run() error { return nil }\n") ||
		!strings.Contains(r.stdout, "earlier visits of implement have records too: --visit 1") {
		t.Errorf("--changes implement: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runNanohostIn(t, dir, "runs", "show", "run-changes", "--changes", "implement", "--visit", "1", "--json")
	var v struct {
		Visit   int            `json:"visit"`
		Changes []gitws.Change `json:"changes"`
		Diff    string         `json:"diff"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || v.Visit != 1 || len(v.Changes) != 2 || !strings.Contains(v.Diff, "+Runs.\n") {
		t.Errorf("--visit 1 --json: %v %+v\n%s", err, v, r.stdout)
	}

	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"show", "run-changes", "implement"}, 2, "goes with --changes"},
		{[]string{"show", "run-changes", "--changes", "--visit", "1"}, 2, "--visit needs a NODE"},
		{[]string{"show", "run-changes", "--changes", "check"}, 1, "node check of run run-changes has no change record"},
		{[]string{"show", "run-changes", "--changes", "implement", "--visit", "7"}, 1, "no record of visit 7"},
	} {
		r := runNanohostIn(t, dir, append([]string{"runs"}, c.args...)...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) {
			t.Errorf("runs %v: exit %d, stderr %q; want %d and %q", c.args, r.code, r.stderr, c.code, c.want)
		}
	}
}

func TestDiffColours(t *testing.T) {
	got := colorLine("+added\n", true) + colorLine("-gone\n", true) + colorLine("@@ -1 +1 @@\n", true) + colorLine(" same\n", true)
	want := "\x1b[32m+added\x1b[0m\n\x1b[31m-gone\x1b[0m\n\x1b[36m@@ -1 +1 @@\x1b[0m\n same\n"
	if got != want {
		t.Errorf("colours %q, want %q", got, want)
	}
}
