package host

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/testkit"
)

// A pipeline the group's agent started over IPC is told back into the
// group's conversation when it ends, so the agent's next answer knows what
// it did.
func TestAgentStartedPipelineOutcomeIsToldToTheConversation(t *testing.T) {
	h := startTestHost(t, "", func(ctx context.Context, req engine.Request) (engine.Result, error) {
		if req.NodeID == "b" {
			return engine.Result{Text: "the build broke [outcome:fail]"}, nil
		}
		return succeed(ctx, req)
	})
	h.writeRequest(t, "tasks", "start-1", map[string]any{"type": "start_pipeline", "dot": goalDOT})
	resp := h.response(t, "start-1")
	runID, _ := resp["run_id"].(string)
	if resp["status"] != "accepted" || runID == "" {
		t.Fatalf("start_pipeline: %v", resp)
	}
	told := func() []string {
		return slices.DeleteFunc(h.agents.prompts("chat"), func(p string) bool { return !strings.Contains(p, "[PIPELINE "+runID) })
	}
	testkit.WaitUntil(t, 10*time.Second, "the agent is told its pipeline's outcome", func() bool { return len(told()) == 1 })
	p := told()[0]
	for _, want := range []string{"The pipeline you started", "has ended: failed", "the build broke"} {
		if !strings.Contains(p, want) {
			t.Errorf("the conversation's prompt lacks %q:\n%s", want, p)
		}
	}
}
