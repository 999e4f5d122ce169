package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"nanohost/internal/runs"
	"nanohost/internal/testkit"
)

const oneStage = `digraph Hello { graph [goal="Say hello"]; start [shape=Mdiamond]; ` +
	`greet [prompt="Say hello"]; done [shape=Msquare]; start -> greet -> done }`

// Issue 30, item 1: a stage whose container cannot start because the agent
// image is missing does not fail the run: the run is interrupted, waiting
// for the host, its thread says what is missing and how to get it, and once
// the image is there `/pipeline resume` takes it to its end.
func TestMissingAgentImageLeavesTheRunWaitingForTheHost(t *testing.T) {
	docker := requireDocker(t)
	missing := fmt.Sprintf("nanohost-agent:absent-%d", time.Now().UnixNano())
	e := start(t, docker, setup{script: map[string]any{"default": "hello [outcome:success]"}, image: missing})
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", missing).Run() })

	e.typeLine("/pipeline run " + oneStage)
	e.screen.WaitFor(t, "waiting for the host", 1, 60*time.Second)
	ctx := context.Background()
	list, err := e.store.ListRuns(ctx, runs.Filter{})
	if err != nil || len(list.Runs) != 1 {
		t.Fatalf("runs = %+v, %v; want one", list, err)
	}
	runID := list.Runs[0].ID
	testkit.WaitUntil(t, 10*time.Second, "the run is recorded as interrupted", func() bool {
		r, err := e.store.GetRun(ctx, runID)
		return err == nil && r.Status == runs.Interrupted
	})
	out := e.screen.Text()
	for _, want := range []string{"image not found: " + missing, "docker build -t " + missing, "scripts/test-image.sh",
		"/pipeline resume " + runs.ShortID(runID)} {
		if !strings.Contains(out, want) {
			t.Errorf("the thread does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Pipeline failed") {
		t.Errorf("the run was told as failed:\n%s", out)
	}

	// The person builds the image (here: tags the test image) and resumes.
	if b, err := exec.Command("docker", "tag", testImage, missing).CombinedOutput(); err != nil {
		t.Fatalf("docker tag: %v: %s", err, b)
	}
	e.typeLine("/pipeline resume " + runs.ShortID(runID))
	e.screen.WaitFor(t, "Pipeline complete", 1, 60*time.Second)
	testkit.WaitUntil(t, 10*time.Second, "the run is recorded as succeeded", func() bool {
		r, err := e.store.GetRun(ctx, runID)
		return err == nil && r.Status == runs.Succeeded
	})
	if n := countEvents(t, e.store, runID, "StageCompleted", "greet"); n != 1 {
		t.Errorf("greet completed %d times, want 1", n)
	}
}
