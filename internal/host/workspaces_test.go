package host

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"nanohost/internal/config"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runs"
)

// A finished run's working tree is removed once workspaces.retention has
// passed; the files it committed stay on its branch.
func TestFinishedRunsTreeIsRemovedAfterTheRetention(t *testing.T) {
	var th *testHost
	th = launch(t, hostSetup{answer: func(_ context.Context, req engine.Request) (engine.Result, error) {
		os.WriteFile(filepath.Join(th.agents.workspace(req.RunID), "made.txt"), []byte("made\n"), 0o644)
		return engine.Result{Text: "done [outcome:success]"}, nil
	}, configure: func(c *config.Config) { c.Workspaces.Retention = time.Millisecond }})
	th.writeRequest(t, "tasks", "run-1", map[string]any{"type": "start_pipeline", "dot": goalDOT})
	id, _ := th.response(t, "run-1")["run_id"].(string)
	eventually(t, 10*time.Second, "the run succeeds", func() bool {
		r, err := th.store.GetRun(context.Background(), id)
		return err == nil && r.Status == runs.Succeeded
	})
	tree := th.agents.workspace(id)
	if tree == "" {
		t.Fatal("the run had no tree")
	}
	eventually(t, 10*time.Second, "the finished run's tree is removed", func() bool {
		_, err := os.Stat(tree)
		return os.IsNotExist(err)
	})
	run, _ := th.store.GetRun(context.Background(), id)
	if _, err := os.Stat(filepath.Join(run.LogsRoot, "workspace.json")); err != nil {
		t.Errorf("the run's branch summary is gone: %v", err)
	}
}
