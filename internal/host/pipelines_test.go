package host

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"nanohost/internal/config"
	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runs"
	"nanohost/internal/testkit"
)

const deployDOT = `digraph Deploy {
    start  [shape=Mdiamond]
    ship   [type="deploy", prompt="Ship it"]
    exit   [shape=Msquare]
    start -> ship -> exit
}`

var deployHandler = engine.HandlerFunc(func(context.Context, *engine.Stage) (engine.Outcome, error) {
	return engine.Outcome{Status: engine.StatusSuccess}, nil
})

func typeWarnings(diags []pipeline.Diagnostic) []pipeline.Diagnostic {
	var out []pipeline.Diagnostic
	for _, d := range diags {
		if d.Rule == "type_known" {
			out = append(out, d)
		}
	}
	return out
}

// Pipelines are validated against the handler types the host's engine
// has: a custom type registered with the engine draws no warning, one it
// does not know does.
func TestPipelinesAreValidatedAgainstTheEngineRegistry(t *testing.T) {
	reg := engine.NewRegistry()
	reg.Register("deploy", deployHandler)
	withDeploy := frontEnd{registry: reg, folders: groupFolders{dataDir: config.Defaults().DataDir}}
	_, diags, err := withDeploy.load("main", "deploy.dot", []byte(deployDOT), "")
	if err != nil {
		t.Fatal(err)
	}
	if w := typeWarnings(diags); len(w) != 0 {
		t.Errorf("a registered custom type drew warnings: %v", w)
	}
	builtin := frontEnd{registry: engine.NewRegistry(), folders: withDeploy.folders}
	_, diags, _ = builtin.load("main", "deploy.dot", []byte(deployDOT), "")
	if w := typeWarnings(diags); len(w) != 1 {
		t.Errorf("an unregistered type drew %v; want one type_known warning", w)
	}
}

// goalDOT has its own goal, and a trailing comment with a brace in it.
const goalDOT = `digraph Goal {
    graph [goal="The goal written in the file"]
    start [shape=Mdiamond]
    a     [prompt="Plan: $goal"]
    b     [prompt="Build: $goal"]
    exit  [shape=Msquare]
    start -> a -> b -> exit
}
// the end }
`

// A goal given when a run starts replaces the pipeline's own in every
// prompt — quotes, braces and all — while the source is stored as written;
// a run resumed after a restart keeps that goal.
func TestRunGoalGivenAtStartSurvivesResume(t *testing.T) {
	goal := `Say "hello" to {everyone} \ twice — ünïcode`
	first := startTestHost(t, "", func(ctx context.Context, req engine.Request) (engine.Result, error) {
		if req.NodeID == "b" {
			<-ctx.Done() // the host stops while b works
			return engine.Result{}, ctx.Err()
		}
		return succeed(ctx, req)
	})
	first.writeRequest(t, "tasks", "start-goal", map[string]any{"type": "start_pipeline", "dot": goalDOT, "goal": goal})
	resp := first.response(t, "start-goal")
	runID, _ := resp["run_id"].(string)
	if resp["status"] != "accepted" || runID == "" {
		t.Fatalf("start_pipeline: %v", resp)
	}
	testkit.WaitUntil(t, 10*time.Second, "b is at work", func() bool { return len(first.agents.prompts("b")) == 1 })
	if got := first.agents.prompts("a"); len(got) != 1 || got[0] != "Plan: "+goal {
		t.Errorf("a was prompted %q; want the run's goal expanded", got)
	}
	first.stop()

	second := startTestHost(t, first.dir, succeed)
	ctx := context.Background()
	testkit.WaitUntil(t, 10*time.Second, "the resumed run succeeds", func() bool {
		r, err := second.store.GetRun(ctx, runID)
		return err == nil && r.Status == runs.Succeeded
	})
	if got := second.agents.prompts("b"); len(got) != 1 || got[0] != "Build: "+goal {
		t.Errorf("after the restart b was prompted %q; want the run's goal, not the file's", got)
	}
	if got := second.agents.prompts("a"); len(got) != 0 {
		t.Errorf("a ran again after the restart: %q", got)
	}
	run, _ := second.store.GetRun(ctx, runID)
	if run.SourceDOT != goalDOT || run.Goal != goal {
		t.Errorf("stored source changed or goal lost:\nsource %q\ngoal %q", run.SourceDOT, run.Goal)
	}
}

// blockAt answers every node but node at once; node works until the host
// (or a person) stops it.
func blockAt(node string) agentFunc {
	return func(ctx context.Context, req engine.Request) (engine.Result, error) {
		if req.NodeID == node {
			<-ctx.Done()
			return engine.Result{}, ctx.Err()
		}
		return succeed(ctx, req)
	}
}

// A run stopped by the host's shutdown is interrupted, not cancelled: its
// thread and card say it goes on when the host starts again (and it does);
// a run a person cancels says cancelled.
func TestShutdownInterruptsRunsAndThreadsSaySo(t *testing.T) {
	ctx := context.Background()
	first := startTestHost(t, "", blockAt("b"))
	first.writeRequest(t, "tasks", "run-1", map[string]any{"type": "start_pipeline", "dot": goalDOT})
	interrupted, _ := first.response(t, "run-1")["run_id"].(string)
	testkit.WaitUntil(t, 10*time.Second, "b is at work", func() bool { return len(first.agents.prompts("b")) == 1 })
	first.stop()
	screen := first.screen.Text()
	if !strings.Contains(screen, "⏸ Run interrupted") || !strings.Contains(screen, "⏸ interrupted — b (2/3)") || strings.Contains(screen, "cancelled") {
		t.Errorf("the thread of a run stopped by shutdown should say interrupted (and where), never cancelled:\n%s", screen)
	}

	second := startTestHost(t, first.dir, blockAt("b"))
	testkit.WaitUntil(t, 10*time.Second, "the interrupted run resumes", func() bool { return len(second.agents.prompts("b")) == 1 })
	if _, err := io.WriteString(second.typing, "/pipeline cancel "+interrupted+"\n"); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, 10*time.Second, "the run is cancelled", func() bool {
		r, err := second.store.GetRun(ctx, interrupted)
		return err == nil && r.Status == runs.Cancelled
	})
	// One line says it, and who cancelled: the person at the console.
	testkit.WaitUntil(t, 5*time.Second, "the thread says cancelled, by whom", func() bool {
		return strings.Contains(second.screen.Text(), "⊘ Pipeline cancelled by you")
	})
	if n := linesWith(second.screen.Text(), "cancel"); n > 2 {
		t.Errorf("a cancel printed %d lines mentioning it; want the run's one line (and its card):\n%s", n, second.screen.Text())
	}
	if strings.Contains(second.screen.Text(), "Run interrupted") {
		t.Errorf("a run a person cancelled is shown as interrupted:\n%s", second.screen.Text())
	}
}

// linesWith counts the lines of text that contain s.
func linesWith(text, s string) int {
	n := 0
	for line := range strings.SplitSeq(text, "\n") {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}
