package container

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/frontend"
)

// A whole pipeline through the engine on real containers: a tool node's
// exit status routes to a fix node, whose agent crashes once (a transient
// error the engine retries) and then fixes the workspace, after which the
// tool passes.
func TestPipelineRoutesOnToolExitCodeAndRetriesACrashedAgent(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) {
		c.Agent = AgentConfig{Kind: "command", Command: `if [ "$NANOAGENT_EXECUTION" = 1 ]; then kill -9 $PPID; sleep 5; fi
touch ready.txt; echo "fixed it [outcome:success]"`}
	})
	src := []byte(`digraph tools {
		start [shape=Mdiamond]
		check [shape=parallelogram, tool_command="test -f ready.txt || { echo not ready; exit 1; }"]
		fix   [prompt="make the workspace ready", max_retries=2]
		done  [shape=Msquare]
		start -> check
		check -> done [condition="outcome=success"]
		check -> fix  [condition="outcome=fail"]
		fix -> check
	}`)
	g, diags, err := frontend.Prepare("tools.dot", src, frontend.Options{KnownTypes: engine.BuiltinTypes()})
	if err != nil || pipeline.HasErrors(diags) {
		t.Fatalf("pipeline: %v %v", err, diags)
	}
	logs := t.TempDir()
	eng := engine.New(engine.Config{Backend: h.b, LogsRoot: logs, RunID: "run-pipeline", NoBackoff: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := eng.Run(ctx, g, src, "tools.dot")
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != engine.StateSuccess {
		t.Fatalf("run %s: %s\nlogs:\n%s", res.Status, res.FailureReason, h.logs.String())
	}
	if want := []string{"start", "check", "fix", "check", "done"}; !slices.Equal(res.Path, want) {
		t.Errorf("path %v, want %v", res.Path, want)
	}
	if res.Attempts["fix"] != 2 {
		t.Errorf("fix ran %d times, want 2 (one crash, one retry)", res.Attempts["fix"])
	}
	if _, err := os.Stat(filepath.Join(h.cfg.Workspace, "ready.txt")); err != nil {
		t.Errorf("the agent's change is not in the workspace: %v", err)
	}
	if out, _ := os.ReadFile(filepath.Join(logs, "check", "stdout.txt")); len(out) != 0 {
		t.Errorf("the passing check's stdout.txt holds %q; want the last visit's (empty) output", out)
	}
	// The engine closed the run: nothing of it is left running.
	if n := len(h.running(map[string]string{LabelRun: "run-pipeline"})); n != 0 {
		t.Errorf("%d containers still running after the run", n)
	}
}
