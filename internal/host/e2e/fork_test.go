package e2e

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"nanohost/internal/runs"
	"nanohost/internal/testkit"
)

const forkPipeline = `digraph Fork {
    start [shape=Mdiamond]
    work  [prompt="Carry on", fidelity="full"]
    exit  [shape=Msquare]
    start -> work -> exit
}`

// A pipeline the group's agent starts over IPC continues that agent's
// conversation: its full-fidelity stage resumes a fork of the chat's
// session (never the session itself, which the chat keeps), and the chat
// answers again when the run is told back. A pipeline a person starts
// begins a conversation of its own. The script agent says which session it
// was resumed from ({{resumed_from}}) and which it answers in ({{session}}).
func TestAgentStartedPipelineContinuesTheAgentsSession(t *testing.T) {
	docker := requireDocker(t)
	report := "resumed from {{resumed_from}} as {{session}} [outcome:success]"
	e := startEnv(t, docker, map[string]any{"nodes": map[string]any{
		"chat": []string{"Hello from the chat", "Your pipeline is done, I see"},
		"work": []string{report, report},
	}}, 5)
	ctx := context.Background()

	e.typeLine("hello agent")
	e.screen.WaitFor(t, "Hello from the chat", 1, 60*time.Second)
	var chat string
	testkit.WaitUntil(t, 10*time.Second, "the chat's session is recorded", func() bool {
		chat, _ = e.store.GetSession(ctx, "main", "")
		return chat != ""
	})

	writeIPCRequest(t, e.cfg.DataDir, "main", "tasks", "start-fork", map[string]any{"type": "start_pipeline", "dot": forkPipeline})
	resp := readResponse(t, e.cfg.DataDir, "main", "start-fork")
	agentRun, _ := resp["run_id"].(string)
	if resp["status"] != "accepted" || agentRun == "" {
		t.Fatalf("start_pipeline response = %v; want accepted with a run id", resp)
	}
	from, session := workReport(t, e, agentRun)
	if from != chat {
		t.Errorf("the agent's pipeline's full stage resumed %q, want the chat's session %q", from, chat)
	}
	if session == chat || session == "" {
		t.Errorf("the full stage answered in session %q: want a fork of the chat's %q, not the chat itself", session, chat)
	}
	if got, _ := e.store.GetSession(ctx, "main", "fork:"+agentRun); got != chat {
		t.Errorf("the session the run forks is recorded as %q, want %q (a resumed run forks the same one)", got, chat)
	}
	// The outcome is told back and the chat answers in its own session.
	e.screen.WaitFor(t, "Your pipeline is done, I see", 1, 60*time.Second)
	if got, _ := e.store.GetSession(ctx, "main", ""); got != chat {
		t.Errorf("the chat's session became %q after the pipeline, want it undisturbed: %q", got, chat)
	}

	// A person's run starts fresh.
	if err := os.WriteFile(filepath.Join(e.cfg.DataDir, "groups", "main", "fork.dot"), []byte(forkPipeline), 0o644); err != nil {
		t.Fatal(err)
	}
	e.typeLine("/pipeline run fork")
	var personRun string
	testkit.WaitUntil(t, 30*time.Second, "the person's run is recorded", func() bool {
		page, err := e.store.ListRuns(ctx, runs.Filter{Group: "main"})
		if err != nil {
			return false
		}
		for _, r := range page.Runs {
			if r.ID != agentRun && r.Parent == "" {
				personRun = r.ID
			}
		}
		return personRun != ""
	})
	if from, _ := workReport(t, e, personRun); from != "none" {
		t.Errorf("a person's pipeline's full stage resumed %q, want a new conversation", from)
	}
}

var sessionReport = regexp.MustCompile(`resumed from (\S+) as (\S+)`)

// workReport waits for run to succeed and returns what its work stage said:
// the session it was resumed from and the one it answered in.
func workReport(t *testing.T, e *env, runID string) (from, session string) {
	t.Helper()
	ctx := context.Background()
	var run runs.Run
	testkit.WaitUntil(t, 90*time.Second, "run "+runID+" succeeds", func() bool {
		r, err := e.store.GetRun(ctx, runID)
		if err == nil && (r.Status == runs.Failed || r.Status == runs.Cancelled) {
			t.Fatalf("run %s ended %s: %s", runID, r.Status, r.FailureReason)
		}
		run = r
		return err == nil && r.Status == runs.Succeeded
	})
	files, _ := filepath.Glob(filepath.Join(run.LogsRoot, "work*", "response.md"))
	if len(files) != 1 {
		t.Fatalf("run %s: work's response files = %v, want one", runID, files)
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	m := sessionReport.FindStringSubmatch(strings.TrimSpace(string(data)))
	if m == nil {
		t.Fatalf("run %s: work answered %q, want a session report", runID, data)
	}
	return m[1], m[2]
}
