package host

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"nanohost/internal/config"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/mask"
	"nanohost/internal/runs"
	"nanohost/internal/testkit"
)

const identityDOT = `digraph Identity {
    start  [shape=Mdiamond]
    recall [prompt="Recall", persona=triager, masks="recall"]
    dig    [prompt="Dig", persona=seeker]
    done   [shape=Msquare]
    start -> recall -> dig -> done
}`

// A group's personas/ folder and the configured masks reach its runs:
// validation accepts what they define, the prompts carry the preambles, the
// backend is told the masks.
func TestRunsUseTheGroupsPersonasAndTheConfiguredMasks(t *testing.T) {
	th := launch(t, hostSetup{answer: succeed, configure: func(c *config.Config) {
		c.Masks = map[string]mask.Mask{"recall": {Title: "Mask of Recall", Nodes: []string{"recall"},
			Context: map[string]string{"prior_rca_available": "true"}, Preamble: "Consult the prior analyses."}}
	}})
	personas := filepath.Join(th.GroupDir("main"), PersonasDir)
	if err := os.MkdirAll(personas, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(personas, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("triager.md", "---\ntitle: Triager\nreasoning_effort: low\n---\nYou are the Triager: sort the failure in one pass.\n")

	th.writeRequest(t, "tasks", "start-identity", map[string]any{"type": "start_pipeline", "dot": identityDOT})
	resp := th.response(t, "start-identity")
	runID, _ := resp["run_id"].(string)
	if resp["status"] != "accepted" {
		t.Fatalf("start_pipeline: %v", resp)
	}
	ctx := context.Background()
	testkit.WaitUntil(t, 10*time.Second, "the run succeeds", func() bool {
		r, err := th.store.GetRun(ctx, runID)
		return err == nil && r.Status == runs.Succeeded
	})
	got := th.agents.prompts("recall")
	if len(got) != 1 || !strings.HasPrefix(got[0], "## Persona: Triager\n\nYou are the Triager") ||
		!strings.Contains(got[0], "- Mask of Recall — Consult the prior analyses.") || !strings.HasSuffix(got[0], "## Task\n\nRecall") {
		t.Errorf("recall's prompt = %q", got)
	}
	if got := th.agents.prompts("dig"); len(got) != 1 || !strings.HasPrefix(got[0], "## Persona: Seeker") {
		t.Errorf("dig's prompt = %q", got)
	}
	var masks []string
	th.agents.mu.Lock()
	for _, r := range th.agents.reqs {
		if r.NodeID == "recall" {
			masks = r.Masks
		}
	}
	th.agents.mu.Unlock()
	if !slices.Equal(masks, []string{"recall"}) {
		t.Errorf("the backend was told masks %v for recall", masks)
	}
	// The stored events (the thread, the dashboard) say who worked it.
	events, err := th.store.Events(ctx, runID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var who []string
	for _, e := range events {
		if e.Type == engine.EventStageStarted && e.Persona != "" {
			who = append(who, fmt.Sprintf("%s:%s%v", e.NodeID, e.Persona, e.Masks))
		}
	}
	if !slices.Equal(who, []string{"recall:triager[recall]", "dig:seeker[]"}) {
		t.Errorf("stored stage events: %v", who)
	}

	// Another group's personas are not this one's, an unknown mask is
	// refused before anything runs, and a broken persona file is named.
	th.writeRequest(t, "tasks", "start-unknown-mask", map[string]any{"type": "start_pipeline",
		"dot": strings.Replace(identityDOT, `masks="recall"`, `masks="recal"`, 1)})
	if resp := th.response(t, "start-unknown-mask"); resp["status"] == "accepted" || !strings.Contains(fmt.Sprint(resp), "mask_known") ||
		!strings.Contains(fmt.Sprint(resp), "did you mean recall?") {
		t.Errorf("unknown mask: %v", resp)
	}
	write("broken.md", "---\nreasoning_effort: extreme\n---\nYou are broken.\n")
	th.writeRequest(t, "tasks", "start-broken", map[string]any{"type": "start_pipeline", "dot": identityDOT})
	if resp := th.response(t, "start-broken"); resp["status"] == "accepted" || !strings.Contains(fmt.Sprint(resp), "broken.md") {
		t.Errorf("broken persona file: %v", resp)
	}
}
