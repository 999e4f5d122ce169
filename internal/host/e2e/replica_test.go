package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"nanohost/internal/channels/slacktest"
	"nanohost/internal/runs"
	"nanohost/internal/store"
	"nanohost/internal/store/storetest"
	"nanohost/internal/testkit"
)

// replicas is several real `nanohost serve` processes (the binary built
// once per test process) sharing one throwaway PostgreSQL, real Docker
// (script-mode agents of the offline test image) and one fake Slack
// workspace, each replica with its own data directory and HTTP port — what
// docs/scaling.md describes, on one machine.
type replicas struct {
	t        *testing.T
	bin      string
	storeURL string
	fake     *slacktest.Server
	script   string
	// leaseTTL is replica.lease_ttl for every replica.
	leaseTTL time.Duration
	// pipelines are written into every replica's main group workspace
	// (name.dot → source).
	pipelines map[string]string
	started   map[string]*replica
	// env is added to every replica's environment.
	env []string
	// extra is appended to every replica's nanohost.yaml (schedules:,
	// webhooks:, …).
	extra string
}

// replica is one `nanohost serve` of a replicas set.
type replica struct {
	id   string
	dir  string // holds nanohost.yaml, data/ and serve.log
	addr string // the HTTP endpoint: /healthz, /metrics, the dashboard
	proc *serveProcess
}

// replicaHealth is what a replica's /healthz says.
type replicaHealth struct {
	OK       bool              `json:"ok"`
	Replica  string            `json:"replica"`
	Channels map[string]string `json:"channels"`
	Leases   []string          `json:"leases"`
}

// newReplicas prepares a set sharing a new PostgreSQL database and a new
// fake Slack workspace; script is every agent's script (S.json). Docker
// and PostgreSQL are required (each skips loudly when missing unless
// NANOHOST_REQUIRE_DOCKER / NANOHOST_REQUIRE_POSTGRES say otherwise).
func newReplicas(t *testing.T, script any, pipelines map[string]string) *replicas {
	t.Helper()
	requireDocker(t)
	storeURL := storetest.PostgresURL(t)
	dir := t.TempDir()
	return &replicas{
		t: t, bin: nanohostBinary(t), storeURL: storeURL, fake: newFakeSlack(t), script: writeScript(t, dir, script),
		leaseTTL: 3 * time.Second, pipelines: pipelines, started: map[string]*replica{},
	}
}

// start starts replica id and waits until it serves, connected to Slack.
func (rs *replicas) start(id string) *replica {
	t := rs.t
	t.Helper()
	dir := filepath.Join(t.TempDir(), id)
	ws := filepath.Join(dir, "data", "groups", "main")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, src := range rs.pipelines {
		if err := os.WriteFile(filepath.Join(ws, name+".dot"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	conf := slackServeConfig(t, dir, rs.fake, rs.script)
	if rs.extra != "" {
		f, err := os.OpenFile(conf, os.O_APPEND|os.O_WRONLY, 0)
		if err == nil {
			_, err = f.WriteString(rs.extra)
			f.Close()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	r := &replica{id: id, dir: dir, addr: freeAddr(t)}
	env := append(os.Environ(), "NANOHOST_STORE_URL="+rs.storeURL, "NANOHOST_REPLICA_ID="+id,
		"NANOHOST_HTTP_LISTEN="+r.addr, "NANOHOST_LEASE_TTL="+rs.leaseTTL.String(), "NANOHOST_MAX_CONTAINERS=6")
	env = append(env, rs.env...)
	r.proc = startServe(t, rs.bin, dir, env, "--config", conf)
	rs.started[id] = r
	testkit.WaitUntil(t, 60*time.Second, "replica "+id+" serves and is connected to Slack", func() bool {
		h, err := r.healthz()
		return err == nil && h.Channels["slack"] == "connected"
	})
	return r
}

// store opens the shared database read-only (closed when the test ends).
func (rs *replicas) store() *store.Store {
	rs.t.Helper()
	st, err := store.OpenReadOnly(context.Background(), rs.storeURL)
	if err != nil {
		rs.t.Fatal(err)
	}
	rs.t.Cleanup(func() { st.Close() })
	return st
}

// healthz reads the replica's /healthz.
func (r *replica) healthz() (replicaHealth, error) {
	var h replicaHealth
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + r.addr + "/healthz")
	if err != nil {
		return h, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return h, fmt.Errorf("decode /healthz of %s: %w", r.id, err)
	}
	return h, nil
}

// kill SIGKILLs the replica (no shutdown: its leases are left to expire)
// and waits until the process is gone.
func (r *replica) kill(t *testing.T) {
	t.Helper()
	if err := r.proc.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = r.proc.cmd.Wait()
}

// log is what the replica wrote to its log so far (for failure messages).
func (r *replica) log() string {
	data, _ := os.ReadFile(filepath.Join(r.dir, "serve.log"))
	return string(data)
}

// freeAddr is a loopback address with a port free now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Two replicas share one PostgreSQL and one Slack workspace: both serve,
// and each one's /healthz names it.
func TestReplicasServeSideBySide(t *testing.T) {
	t.Parallel()
	rs := newReplicas(t, map[string]any{"default": map[string]any{"response": "ok [outcome:success]"}}, nil)
	a, b := rs.start("replica-a"), rs.start("replica-b")
	for _, r := range []*replica{a, b} {
		h, err := r.healthz()
		if err != nil {
			t.Fatal(err)
		}
		if !h.OK || h.Replica != r.id {
			t.Errorf("/healthz of %s: ok=%v replica=%q, want ok naming %q\n%s", r.id, h.OK, h.Replica, r.id, r.log())
		}
	}
	// Each replica holds its own Socket Mode connections (two: one can be
	// replaced while the other carries envelopes).
	if n := rs.fake.LiveConnections(); n != 4 {
		t.Errorf("the workspace has %d Socket Mode connections, want two per replica", n)
	}
}

// The three pipelines of the takeover test: one stops at a human gate,
// one has a long stage, one a parallel block with a quick and a slow
// branch. Node ids are unique across them: one agent script serves all.
const (
	takeoverGate = `digraph TakeoverGate {
    start  [shape=Mdiamond]
    g_a    [prompt="prepare"]
    review [shape=hexagon, label="Ship it?"]
    g_b    [prompt="ship"]
    exit   [shape=Msquare]
    start -> g_a -> review
    review -> g_b [label="[A] Approve"]
    review -> exit [label="[R] Reject"]
    g_b -> exit
}`
	takeoverLong = `digraph TakeoverLong {
    start [shape=Mdiamond]
    m_a   [prompt="first"]
    m_b   [prompt="the long one"]
    m_c   [prompt="last"]
    exit  [shape=Msquare]
    start -> m_a -> m_b -> m_c -> exit
}`
	takeoverParallel = `digraph TakeoverParallel {
    start  [shape=Mdiamond]
    fan    [shape=component, join_policy="wait_all"]
    p_fast [prompt="quick branch"]
    p_slow [prompt="slow branch"]
    join   [shape=tripleoctagon, prompt="merge"]
    p_end  [prompt="after the block"]
    exit   [shape=Msquare]
    start -> fan
    fan -> p_fast -> join
    fan -> p_slow -> join
    join -> p_end -> exit
}`
)

// startOn starts the pipeline through replica r's HTTP API (so r drives
// it) and returns the run's id. Its thread is the main group's Slack channel.
func (r *replica) startOn(t *testing.T, dot string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"dot": dot})
	resp, err := http.Post("http://"+r.addr+"/pipelines", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		ID    string `json:"id"`
		Error string `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("start a run on %s: %d %s (%v)", r.id, resp.StatusCode, out.Error, err)
	}
	return out.ID
}

// A replica driving three runs is SIGKILLed — one run waits at a gate,
// one is in the middle of a long stage, one inside a parallel block with
// one branch done. The other replica takes all three over once their
// leases expire and resumes them from their journals in PostgreSQL (A's
// run directories are deleted): no completed stage
// (nor the finished branch) runs again, and each run's story goes on in
// the Slack thread it had, under its one status card.
func TestReplicaTakeoverAfterKill(t *testing.T) {
	t.Parallel()
	step := func(ms int) []any { return []any{map[string]any{"response": "done [outcome:success]", "delay_ms": ms}} }
	rs := newReplicas(t, map[string]any{"nodes": map[string]any{
		"g_a": step(100), "g_b": step(100),
		"m_a": step(100), "m_b": step(15000), "m_c": step(100),
		"p_fast": step(100), "p_slow": step(15000), "join": step(100), "p_end": step(100),
	}}, nil)
	a, b := rs.start("replica-a"), rs.start("replica-b")
	st := rs.store()
	ctx := context.Background()

	gateRun, longRun, parRun := a.startOn(t, takeoverGate), a.startOn(t, takeoverLong), a.startOn(t, takeoverParallel)
	ids := []string{gateRun, longRun, parRun}
	testkit.WaitUntil(t, 90*time.Second, "A's three runs are at a gate, mid-stage and mid-block, told in Slack", func() bool {
		gates, _ := st.RunGates(ctx, gateRun)
		return len(gates) == 1 && gates[0].Status == "open" && gates[0].MessageTS != "" &&
			countEvents(t, st, longRun, "StageStarted", "m_b") == 1 &&
			countEvents(t, st, parRun, "StageCompleted", "p_fast") == 1 && countEvents(t, st, parRun, "StageStarted", "p_slow") == 1
	})
	before := map[string]runs.Run{}
	owners, err := st.LeaseOwners(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		r, err := st.GetRun(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if owners[id] != a.id || r.ThreadTS == "" {
			t.Fatalf("run %s: owner %q, thread %q; want %s driving it with a thread", id, owners[id], r.ThreadTS, a.id)
		}
		before[id] = r
	}
	if h, _ := a.healthz(); len(h.Leases) != 3 {
		t.Errorf("A's /healthz names leases %v, want its three runs", h.Leases)
	}

	gatesBefore, err := st.RunGates(ctx, gateRun)
	if err != nil {
		t.Fatal(err)
	}
	askedByA := gatesBefore[0].MessageTS
	a.kill(t)
	killed := time.Now()
	// B might as well be on another machine: nothing of A's data directory
	// is needed. The runs' journals are in PostgreSQL.
	if err := os.RemoveAll(filepath.Join(a.dir, "data", "runs")); err != nil {
		t.Fatal(err)
	}
	resumedAt := map[string]time.Time{}
	testkit.WaitUntil(t, 30*time.Second, "B resumes all three runs", func() bool {
		for _, id := range ids {
			if _, ok := resumedAt[id]; ok {
				continue
			}
			evs, _ := st.Events(ctx, id, before[id].LastSeq, 0)
			for _, e := range evs {
				if e.Type == "PipelineResumed" {
					resumedAt[id] = e.Time
				}
			}
		}
		return len(resumedAt) == len(ids)
	})
	var takeover time.Duration
	for _, at := range resumedAt {
		takeover = max(takeover, at.Sub(killed))
	}
	t.Logf("takeover: all three runs resumed by %s %s after %s was killed (lease ttl %s)", b.id, takeover.Round(time.Millisecond), a.id, rs.leaseTTL)
	if takeover > 15*time.Second {
		t.Errorf("the runs resumed %s after the kill, want within 15s", takeover)
	}
	if h, _ := b.healthz(); len(h.Leases) != 3 {
		t.Errorf("B's /healthz names leases %v, want the three runs it took over", h.Leases)
	}

	// The gate is asked again in its thread; Bob answers it through Slack.
	var prompt slacktest.Message
	if !rs.fake.WaitFor(30*time.Second, func() bool {
		gates, _ := st.RunGates(ctx, gateRun)
		for _, m := range rs.fake.Thread(opsChat, before[gateRun].ThreadTS) {
			for _, g := range gates {
				// A's posting stays open in the store until B asks again:
				// only B's new posting is the one to click.
				if m.FromBot() && len(m.Buttons()) > 0 && m.TS == g.MessageTS && g.Status == "open" && m.TS != askedByA {
					prompt = m
					return true
				}
			}
		}
		return false
	}) {
		gates, _ := st.RunGates(ctx, gateRun)
		t.Fatalf("the gate was not asked again in the run's thread within 30s; gates %+v; thread:\n%s\nB's log:\n%s",
			gates, threadText(rs.fake, before[gateRun].ThreadTS), b.log())
	}
	click(t, rs.fake, prompt, bob, "Approve")

	done := func() (bool, string) {
		var state []string
		ok := true
		for _, id := range ids {
			r, err := st.GetRun(ctx, id)
			state = append(state, fmt.Sprintf("%s %s delivered %d/%d (%v)", id, r.Status, r.LastDeliveredSeq, r.LastSeq, err))
			ok = ok && err == nil && r.Status == runs.Succeeded && r.LastDeliveredSeq == r.LastSeq
		}
		return ok, strings.Join(state, "; ")
	}
	if !rs.fake.WaitFor(90*time.Second, func() bool { ok, _ := done(); return ok }) {
		_, state := done()
		t.Fatalf("the three runs did not all succeed with every event delivered within 90s: %s\nB's log:\n%s", state, b.log())
	}
	for node, run := range map[string]string{"g_a": gateRun, "m_a": longRun, "p_fast": parRun} {
		if n := countEvents(t, st, run, "StageStarted", node); n != 1 {
			t.Errorf("completed stage %s ran %d times, want once: it must not run again after the takeover", node, n)
		}
	}
	for node, run := range map[string]string{"g_b": gateRun, "m_b": longRun, "m_c": longRun, "p_slow": parRun, "p_end": parRun} {
		if n := countEvents(t, st, run, "StageCompleted", node); n != 1 {
			t.Errorf("stage %s completed %d times, want once", node, n)
		}
	}
	for _, id := range ids {
		after, _ := st.GetRun(ctx, id)
		if after.ThreadTS != before[id].ThreadTS {
			t.Errorf("run %s: thread changed across the takeover: %q → %q", id, before[id].ThreadTS, after.ThreadTS)
		}
		story := threadText(rs.fake, after.ThreadTS)
		if n := strings.Count(story, "Pipeline complete"); n != 1 {
			t.Errorf("run %s: %q told %d times in its thread, want once:\n%s", id, "Pipeline complete", n, story)
		}
	}
	// B's dashboard shows the stages A ran, though A's files are gone.
	for node, run := range map[string]string{"m_a": longRun, "g_a": gateRun, "p_fast": parRun} {
		resp, err := http.Get("http://" + b.addr + "/pipelines/" + run + "/nodes/" + node + "/response.md")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "done") {
			t.Errorf("B's dashboard: %s's response.md of run %s: %d %q; want the response A's agent gave", node, run, resp.StatusCode, body)
		}
	}
	inOrder(t, threadText(rs.fake, before[longRun].ThreadTS), "→ m_a", "✓ m_a", "→ m_b", "✓ m_b", "→ m_c", "✓ m_c", "Pipeline complete")
	var cards []string
	for _, m := range rs.fake.TopLevel(opsChat) {
		if m.FromBot() {
			cards = append(cards, m.TS)
		}
	}
	if len(cards) != len(ids) {
		t.Errorf("%d status cards in the channel (%v), want one per run, from before the takeover", len(cards), cards)
	}
	if len(rs.fake.Undelivered()) > 0 {
		t.Logf("undelivered: %+v", rs.fake.Undelivered())
	}
}
