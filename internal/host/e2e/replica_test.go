package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"nanohost/internal/channels/slacktest"
	"nanohost/internal/store"
	"nanohost/internal/store/storetest"
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
	r := &replica{id: id, dir: dir, addr: freeAddr(t)}
	env := append(os.Environ(), "NANOHOST_STORE_URL="+rs.storeURL, "NANOHOST_REPLICA_ID="+id,
		"NANOHOST_HTTP_LISTEN="+r.addr, "NANOHOST_LEASE_TTL="+rs.leaseTTL.String())
	r.proc = startServe(t, rs.bin, dir, env, "--config", conf)
	rs.started[id] = r
	waitUntil(t, 60*time.Second, "replica "+id+" serves and is connected to Slack", func() bool {
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
