package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"nanohost/internal/channels/slacktest"
	"nanohost/internal/runlog"
	"nanohost/internal/runs"
	"nanohost/internal/testkit"
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

// Twenty five-node pipelines started at once by an agent all complete,
// never with more than five containers running (the others queue for a
// slot), and every event of every run that its thread shows reaches that
// thread in Slack, exactly once.
func TestTwentyConcurrentPipelinesShareFiveContainers(t *testing.T) {
	docker := requireDocker(t)
	fake := newFakeSlack(t)
	e := start(t, docker, setup{slack: fake, maxContainers: 5,
		script: map[string]any{"default": map[string]any{"response": "[outcome:success]", "delay_ms": 200}}})
	const runCount = 20
	began := time.Now()
	for i := range runCount {
		writeIPCRequest(t, e.cfg.DataDir, "main", "tasks", fmt.Sprintf("load-%d", i), map[string]any{
			"type": "start_pipeline", "dot": fiveNodes, "verbosity": "standard",
		})
	}
	ids := make([]string, runCount)
	for i := range runCount {
		resp := readResponse(t, e.cfg.DataDir, "main", fmt.Sprintf("load-%d", i))
		id, _ := resp["run_id"].(string)
		if id == "" {
			t.Fatalf("request %d: %v", i, resp)
		}
		ids[i] = id
	}
	ctx := context.Background()
	peakRSS, peakQueued, peakRunning, peakActive := int64(0), 0.0, 0.0, 0.0
	testkit.WaitUntil(t, 150*time.Second, "all twenty runs succeed with every event delivered", func() bool {
		peakRSS = max(peakRSS, rssKB())
		peakQueued = max(peakQueued, metric(t, e, "nanohost_containers_queued"))
		peakRunning = max(peakRunning, metric(t, e, "nanohost_containers_running"))
		peakActive = max(peakActive, metric(t, e, "nanohost_active_runs"))
		for _, id := range ids {
			r, err := e.store.GetRun(ctx, id)
			if err != nil || r.Status != runs.Succeeded || r.LastDeliveredSeq != r.LastSeq {
				return false
			}
		}
		return true
	})
	wall := time.Since(began)
	if p := e.peak.max(); p > 5 {
		t.Errorf("peak containers = %d, want at most 5", p)
	}
	// What /metrics showed agrees with what happened.
	if peakQueued < 1 || peakRunning < 1 || peakRunning > 5 || peakActive < 5 || peakActive > runCount {
		t.Errorf("metrics during the load: queued peak %v (want ≥1), containers running peak %v (want 1..5), active runs peak %v (want 5..%d)",
			peakQueued, peakRunning, peakActive, runCount)
	}
	testkit.WaitUntil(t, 10*time.Second, "the gauges settle", func() bool {
		return metric(t, e, "nanohost_active_runs") == 0 && metric(t, e, "nanohost_containers_queued") == 0
	})
	if n := metric(t, e, `nanohost_node_duration_seconds_count{status="success"}`); n < runCount*3 {
		t.Errorf("node durations observed for %v successful stages, want at least %d (a, b, c of every run)", n, runCount*3)
	}
	if n := metric(t, e, "nanohost_containers_started_total"); int(n) != e.peak.started() {
		t.Errorf("nanohost_containers_started_total = %v, the backend started %d", n, e.peak.started())
	}
	posted := 0
	for _, id := range ids {
		posted += checkThreadHasEveryEvent(t, e, fake, id)
	}
	cards := 0
	for _, m := range fake.TopLevel(opsChat) {
		if m.FromBot() {
			cards++
		}
	}
	if cards != runCount {
		t.Errorf("%d status cards in the channel, want one per run (%d)", cards, runCount)
	}
	t.Logf("20 concurrent 5-node pipelines on Slack: wall %s, peak containers %d (of %d started), peak queued %v, %d thread messages, peak host RSS %d MiB",
		wall.Round(time.Millisecond), e.peak.max(), e.peak.started(), peakQueued, posted, peakRSS/1024)
}

// checkThreadHasEveryEvent compares the run's thread in Slack with its event
// log: each event the thread shows at the run's verbosity is there, once,
// in order, and nothing else is. It returns the number of thread messages.
func checkThreadHasEveryEvent(t *testing.T, e *env, fake *slacktest.Server, runID string) int {
	t.Helper()
	run, err := e.store.GetRun(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	events, err := e.store.Events(context.Background(), runID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, ev := range events {
		if text, _, ok := runlog.ThreadMessage(ev, run.Verbosity); ok {
			want = append(want, text)
		}
	}
	var got []string
	for _, m := range fake.Thread(opsChat, run.ThreadTS) {
		if m.FromBot() {
			got = append(got, m.Text)
		}
	}
	// The thread starts with the run's branch and base (not an event: the
	// workspace's, posted when the run's tree is made).
	if len(got) == 0 || !strings.HasPrefix(got[0], "On branch nanohost/") {
		t.Errorf("run %s: the thread does not start by naming its branch and base: %q", runID, got)
	} else {
		got = got[1:]
	}
	if len(got) != len(want) {
		t.Errorf("run %s: %d thread messages, want %d (one per shown event):\ngot  %q\nwant %q", runID, len(got), len(want), got, want)
		return len(got)
	}
	for i := range want {
		if !strings.Contains(got[i], strings.TrimSpace(strings.TrimPrefix(want[i], "  "))) {
			t.Errorf("run %s: thread message %d is %q, want %q", runID, i, got[i], want[i])
		}
	}
	return len(got)
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
