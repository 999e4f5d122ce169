package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"nanohost/internal/store"
)

const fiveNodes = `digraph Five {
    graph [goal="Load"]
    start [shape=Mdiamond]
    a [prompt="a"]
    b [prompt="b"]
    c [prompt="c"]
    exit [shape=Msquare]
    start -> a -> b -> c -> exit
}`

// Twenty five-node pipelines started at once all complete, never with more
// than five containers running, and every event of every run reaches the chat.
func TestTwentyConcurrentPipelinesShareFiveContainers(t *testing.T) {
	docker := requireDocker(t)
	e := startEnv(t, docker, map[string]any{"default": map[string]any{"response": "[outcome:success]", "delay_ms": 200}}, 5)
	const runs = 20
	began := time.Now()
	for i := range runs {
		writeIPCRequest(t, e.cfg.DataDir, "main", "tasks", fmt.Sprintf("load-%d", i), map[string]any{
			"type": "start_pipeline", "dot": fiveNodes, "verbosity": "minimal",
		})
	}
	ids := make([]string, runs)
	for i := range runs {
		resp := readResponse(t, e.cfg.DataDir, "main", fmt.Sprintf("load-%d", i))
		id, _ := resp["run_id"].(string)
		if id == "" {
			t.Fatalf("request %d: %v", i, resp)
		}
		ids[i] = id
	}
	ctx := context.Background()
	peakRSS := int64(0)
	waitUntil(t, 150*time.Second, "all twenty runs succeed with every event delivered", func() bool {
		peakRSS = max(peakRSS, rssKB())
		for _, id := range ids {
			r, err := e.store.GetRun(ctx, id)
			if err != nil || r.Status != store.RunSuccess || r.LastDeliveredSeq != r.LastSeq {
				return false
			}
		}
		return true
	})
	wall := time.Since(began)
	if p := e.peak.max(); p > 5 {
		t.Errorf("peak containers = %d, want at most 5", p)
	}
	if n := strings.Count(e.screen.text(), "Pipeline complete"); n != runs {
		t.Errorf("%d completions shown in chat, want %d", n, runs)
	}
	t.Logf("20 concurrent 5-node pipelines: wall %s, peak containers %d (of %d started), peak host RSS %d MiB",
		wall.Round(time.Millisecond), e.peak.max(), e.peak.started(), peakRSS/1024)
}

// rssKB is this process's peak resident set (VmHWM), in KiB.
func rssKB() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(rest), "%d", &kb)
			return kb
		}
	}
	return 0
}
