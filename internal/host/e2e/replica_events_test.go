package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"nanohost/internal/channels/slacktest"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runlog"
	"nanohost/internal/runs"
	"nanohost/internal/store"
	"nanohost/internal/testkit"
)

// twoSteps is two agent stages, each taking a moment (the script's delay):
// six posts per run, which Slack's pace of one post a second per channel
// (per replica) makes the test's clock.
const twoSteps = `digraph Steps {
    start [shape=Mdiamond]
    a     [prompt="step a"]
    b     [prompt="step b"]
    exit  [shape=Msquare]
    start -> a -> b -> exit
}`

// 20 runs over two replicas; replica A is SIGKILLed while runs are under
// way, and started again once B has taken its runs over. Every run ends,
// and every event its thread shows appears in its Slack thread exactly
// once, in order, under one status card: the threads A was telling are
// continued by B from the delivered watermark, the one post that may have
// been in flight looked for before it is posted again.
func TestReplicaEventsExactlyOnce(t *testing.T) {
	t.Parallel()
	const total = 20
	step := []any{map[string]any{"response": "[outcome:success]", "delay_ms": 400}}
	rs := newReplicas(t, map[string]any{"nodes": map[string]any{"a": step, "b": step}}, map[string]string{"steps": twoSteps})
	a := rs.start("replica-a")
	rs.start("replica-b")
	st := rs.store()
	for range total {
		rs.fake.SlashCommand(opsChat, alice, "run steps")
	}
	finished := func() int {
		page, err := st.ListRuns(context.Background(), runs.Filter{Statuses: []runs.State{runs.Succeeded, runs.Failed, runs.Cancelled}, Limit: 100})
		if err != nil {
			return 0
		}
		return len(page.Runs)
	}
	testkit.WaitUntil(t, 120*time.Second, "a quarter of the runs end", func() bool { return finished() >= total/4 })
	if n := finished(); n >= total-2 {
		t.Fatalf("%d of %d runs ended before the kill; nothing left to take over", n, total)
	}
	a.kill(t)
	t.Logf("killed replica A with %d of %d runs ended", finished(), total)
	// Past A's leases and thread claims: B takes A's runs over and
	// continues their threads; then A comes back (for the runs still
	// unclaimed, if any, and new work).
	time.Sleep(rs.leaseTTL + 2*time.Second)
	rs.start("replica-a")

	var all []runs.Run
	deadline := time.Now().Add(420 * time.Second)
	for {
		page, err := st.ListRuns(context.Background(), runs.Filter{Limit: 100})
		all = page.Runs
		if err == nil && len(all) == total && !slices.ContainsFunc(all, func(r runs.Run) bool {
			return r.Status != runs.Succeeded || r.LastDeliveredSeq != r.LastSeq
		}) {
			break
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			for _, r := range all {
				fmt.Fprintf(&b, "%s %s owner=%s seq=%d delivered=%d\n", r.ID, r.Status, r.Owner, r.LastSeq, r.LastDeliveredSeq)
			}
			_ = os.WriteFile(filepath.Join(os.TempDir(), "replica-events-killed.log"), []byte(a.log()), 0o644)
			for id, r := range rs.started {
				_ = os.WriteFile(filepath.Join(os.TempDir(), "replica-events-"+id+".log"), []byte(r.log()), 0o644)
			}
			t.Fatalf("not every run succeeded and was delivered within 7 minutes (%v); logs in %s/replica-events-*.log:\n%s", err, os.TempDir(), b.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	// What the kill left for the others: runs resumed from their
	// checkpoints (taken over by B, or resumed by A started again), and
	// posts that had landed before it and were adopted.
	resumedBy := func(r *replica) int { return strings.Count(r.log(), "resuming run from its checkpoint") }
	adopted := 0
	for _, r := range []*replica{a, rs.started["replica-a"], rs.started["replica-b"]} {
		adopted += strings.Count(r.log(), "had landed; not posting it again")
	}
	t.Logf("after the kill: %d runs taken over by replica B, %d resumed by replica A started again; %d posts found in Slack instead of posted again",
		resumedBy(rs.started["replica-b"]), resumedBy(rs.started["replica-a"]), adopted)
	cards := map[string]int{}
	for _, m := range rs.fake.TopLevel(opsChat) {
		if key, _ := postKey(t, m); strings.HasPrefix(key, "card/") {
			cards[strings.TrimPrefix(key, "card/")]++
		}
	}
	for _, run := range all {
		if cards[run.ID] != 1 {
			t.Errorf("run %s has %d status cards, want 1", run.ID, cards[run.ID])
		}
		checkThreadOnceInOrder(t, rs, st, run)
	}
}

// checkThreadOnceInOrder checks that run's thread shows each event its
// verbosity shows exactly once, in seq order.
func checkThreadOnceInOrder(t *testing.T, rs *replicas, st *store.Store, run runs.Run) {
	t.Helper()
	var shown []int64
	for _, m := range rs.fake.Thread(opsChat, run.ThreadTS) {
		if _, seq := postKey(t, m); seq > 0 {
			shown = append(shown, seq)
		}
	}
	events, err := st.Events(context.Background(), run.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var want []int64
	for _, e := range events {
		// A checkpoint's line depends on what came before it (the start
		// node's is left out): the check is on the rest.
		if _, _, ok := runlog.ThreadMessage(e, run.Verbosity); ok && e.Type != engine.EventCheckpointSaved {
			want = append(want, e.Seq)
		}
	}
	for i := 1; i < len(shown); i++ {
		if shown[i] <= shown[i-1] {
			t.Errorf("run %s: thread shows event %d after %d — twice or out of order: %v", run.ID, shown[i], shown[i-1], shown)
			return
		}
	}
	var missing []int64
	for _, seq := range want {
		if !slices.Contains(shown, seq) {
			missing = append(missing, seq)
		}
	}
	if len(missing) > 0 {
		var where []string // every post of the run, wherever it went
		for _, m := range rs.fake.Messages(opsChat) {
			if key, _ := postKey(t, m); strings.Contains(key, run.ID) {
				where = append(where, key+" in "+firstNonEmpty(m.ThreadTS, "the channel"))
			}
		}
		t.Errorf("run %s: events %v are not in its thread %s (shown: %v); its posts: %v", run.ID, missing, run.ThreadTS, shown, where)
	}
}

// postKey reads the key and event seq nanohost put in a message's
// metadata ("" and 0 for a message without).
func postKey(t *testing.T, m slacktest.Message) (string, int64) {
	t.Helper()
	if len(m.Metadata) == 0 {
		return "", 0
	}
	var meta struct {
		Payload struct {
			Key string `json:"key"`
			Seq int64  `json:"seq"`
		} `json:"event_payload"`
	}
	if err := json.Unmarshal(m.Metadata, &meta); err != nil {
		t.Fatalf("message %s metadata %s: %v", m.TS, m.Metadata, err)
	}
	return meta.Payload.Key, meta.Payload.Seq
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
