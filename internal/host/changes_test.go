package host

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"nanohost/internal/config"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runs"
	"nanohost/internal/testkit"
	"nanohost/internal/workspace"
)

const reworkDOT = `digraph Review {
    start     [shape=Mdiamond]
    implement [prompt="Implement it"]
    review    [shape=hexagon, label="Ship it?"]
    exit      [shape=Msquare]
    start -> implement -> review
    review -> exit [label="[A] Approve"]
    review -> implement [label="[R] Rework"]
}`

// A run's stages record what they changed in the group's workspace: the
// stage directory has changes.json and changes.diff, a verbose thread says
// "± implement changed 2 files (+4 −1)", and the gate prompt links the
// changes since the run started on the dashboard.
func TestRunRecordsWorkspaceChangesAndTheGateLinksThem(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "data", "groups", "main")
	var th *testHost
	th = launch(t, hostSetup{dir: dir, answer: func(_ context.Context, req engine.Request) (engine.Result, error) {
		if req.NodeID == "implement" {
			tree := th.agents.workspace(req.RunID)
			os.WriteFile(filepath.Join(tree, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644)
			os.WriteFile(filepath.Join(tree, "notes.txt"), []byte("new notes\n"), 0o644)
		}
		return engine.Result{Text: "done [outcome:success]"}, nil
	}, configure: func(c *config.Config) { c.HTTP.PublicURL = "https://nano.example.com/" }})
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("old notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	th.writeRequest(t, "tasks", "run-1", map[string]any{"type": "start_pipeline", "dot": reworkDOT, "verbosity": "verbose"})
	id, _ := th.response(t, "run-1")["run_id"].(string)
	testkit.WaitUntil(t, 10*time.Second, "the gate prompt with its link", func() bool { return strings.Contains(th.screen.Text(), "#changes") })

	screen := th.screen.Text()
	if !strings.Contains(screen, "± implement changed 2 files (+4 −1): main.go, notes.txt") {
		t.Errorf("the verbose thread does not say what implement changed:\n%s", screen)
	}
	link := "Changes since the run started: 2 files (+4 −1): https://nano.example.com/runs/" + id + "#changes"
	if !strings.Contains(screen, link) {
		t.Errorf("the gate prompt does not link the run's changes (%q):\n%s", link, screen)
	}
	run, err := th.store.GetRun(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	list, err := os.ReadFile(filepath.Join(run.LogsRoot, "implement", workspace.ListFile))
	if err != nil || !regexp.MustCompile(`"path": "main.go",\s+"change": "added"`).Match(list) {
		t.Errorf("implement's changes.json: %s %v", list, err)
	}
	if diff, _ := os.ReadFile(filepath.Join(run.LogsRoot, "implement", workspace.DiffFile)); !strings.Contains(string(diff), "-old notes\n+new notes\n") {
		t.Errorf("implement's changes.diff:\n%s", diff)
	}
	if _, err := io.WriteString(th.typing, "A\n"); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, 10*time.Second, "the run succeeds", func() bool {
		r, err := th.store.GetRun(context.Background(), id)
		return err == nil && r.Status == runs.Succeeded
	})
}

// Without git workspaces (workspaces.git: false) a run works in the group's
// folder itself, on no branch, and nothing records what its stages changed:
// no stage's change record, no run record, no branch under the message that
// it ended.
func TestWithoutGitWorkspacesRunsWorkInTheFolderUnrecorded(t *testing.T) {
	dir := t.TempDir()
	var th *testHost
	th = launch(t, hostSetup{dir: dir, answer: func(_ context.Context, req engine.Request) (engine.Result, error) {
		if req.NodeID == "a" {
			os.WriteFile(filepath.Join(th.agents.workspace(req.RunID), "made.txt"), []byte("made\n"), 0o644)
		}
		return engine.Result{Text: "done [outcome:success]"}, nil
	}, configure: func(c *config.Config) { c.Workspaces.Git = false }})
	th.writeRequest(t, "tasks", "run-1", map[string]any{"type": "start_pipeline", "dot": goalDOT})
	id, _ := th.response(t, "run-1")["run_id"].(string)
	var run runs.Run
	testkit.WaitUntil(t, 10*time.Second, "the run succeeds", func() bool {
		r, err := th.store.GetRun(context.Background(), id)
		run = r
		return err == nil && r.Status == runs.Succeeded
	})
	if got, err := os.ReadFile(filepath.Join(dir, "data", "groups", "main", "made.txt")); err != nil || string(got) != "made\n" {
		t.Errorf("the stage did not work in the group's folder: %q %v", got, err)
	}
	for _, p := range []string{filepath.Join("a", workspace.ListFile), filepath.Join(workspace.RunDir, workspace.ListFile), workspace.SummaryFile} {
		if _, err := os.Stat(filepath.Join(run.LogsRoot, p)); err == nil {
			t.Errorf("%s recorded without git workspaces", p)
		}
	}
	if strings.Contains(th.screen.Text(), "Branch nanohost/") {
		t.Errorf("the thread names a branch without git workspaces:\n%s", th.screen.Text())
	}
}
