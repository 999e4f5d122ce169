package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"nanohost/internal/channels/console"
	"nanohost/internal/config"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runs"
	"nanohost/internal/store"
	"nanohost/internal/testkit"
)

func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// /healthz says what is up (store, Docker, each channel, active runs) and
// /metrics has every collector the operations section promises; with
// http.token set both want it as a bearer token.
func TestHealthAndMetricsEndpoints(t *testing.T) {
	th := launch(t, hostSetup{answer: succeed, configure: func(c *config.Config) { c.HTTP.Token = "s3cret"; c.Replica.ID = "replica-x" }})
	base := "http://" + th.HTTPAddr()
	if code, _ := get(t, base+"/healthz", ""); code != http.StatusUnauthorized {
		t.Errorf("/healthz without the token: %d, want 401", code)
	}
	if code, _ := get(t, base+"/metrics", "wrong"); code != http.StatusUnauthorized {
		t.Errorf("/metrics with a wrong token: %d, want 401", code)
	}
	code, body := get(t, base+"/healthz", "s3cret")
	var h Health
	if err := json.Unmarshal([]byte(body), &h); err != nil {
		t.Fatalf("/healthz: %v: %s", err, body)
	}
	// No Docker pinger in this host: docker is "unknown", which is not a failure.
	if code != http.StatusOK || !h.OK || h.Store != "ok" || h.Docker != "unknown" || h.Channels["console"] != "connected" || h.Runs != 0 {
		t.Errorf("/healthz = %d %+v", code, h)
	}
	code, body = get(t, base+"/metrics", "s3cret")
	for _, name := range []string{
		"nanohost_active_runs 0", "nanohost_containers_running", "nanohost_containers_started_total", "nanohost_containers_reclaimed_total 0",
		"nanohost_chat_messages_queued 0", `nanohost_channel_connected{channel="console"} 1`, "go_goroutines", "process_resident_memory_bytes",
		`nanohost_replica_info{replica="replica-x"} 1`,
	} {
		if !strings.Contains(body, name) {
			t.Errorf("/metrics (%d) lacks %s", code, name)
		}
	}
}

// Without a token, /healthz and /metrics answer only requests naming a
// loopback host, like every dashboard route: a DNS-rebinding page
// (evil.example resolving to 127.0.0.1) must not read run counts or metrics.
func TestHealthAndMetricsApplyTheLoopbackHostRule(t *testing.T) {
	th := launch(t, hostSetup{answer: succeed})
	addr := th.HTTPAddr()
	_, port, _ := strings.Cut(addr, ":")
	for _, path := range []string{"/healthz", "/metrics", "/pipelines"} {
		for host, want := range map[string]int{
			"evil.example":         http.StatusMisdirectedRequest,
			"evil.example:" + port: http.StatusMisdirectedRequest,
			"localhost:" + port:    http.StatusOK,
			addr:                   http.StatusOK,
		} {
			req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Host = host
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("GET %s with Host %s: %d, want %d: %.200s", path, host, resp.StatusCode, want, body)
			}
			if want != http.StatusOK && strings.Contains(string(body), "nanohost_") {
				t.Errorf("GET %s with Host %s leaked metrics", path, host)
			}
		}
	}
}

// Custom outcome words are the agent's choice: in nanohost_node_duration_seconds
// they all count as status="custom", so a chatty agent cannot grow the
// number of series.
func TestCustomOutcomesShareOneMetricLabel(t *testing.T) {
	words := map[string]string{"a": "needs_dod", "b": "has_dod", "c": "yes"}
	th := startTestHost(t, "", func(ctx context.Context, req engine.Request) (engine.Result, error) {
		if w, ok := words[req.NodeID]; ok {
			return engine.Result{Text: "[outcome:" + w + "]"}, nil
		}
		return succeed(ctx, req)
	})
	dot := "digraph C { start [shape=Mdiamond]; exit [shape=Msquare]; a [prompt=\"a\"]; b [prompt=\"b\"]; c [prompt=\"c\"]; start -> a -> b -> c -> exit }"
	th.writeRequest(t, "tasks", "custom", map[string]any{"type": "start_pipeline", "dot": dot})
	resp := th.response(t, "custom")
	runID, _ := resp["run_id"].(string)
	testkit.WaitUntil(t, 10*time.Second, "the run succeeds", func() bool {
		r, err := th.store.GetRun(context.Background(), runID)
		return err == nil && r.Status == runs.Succeeded
	})
	_, body := get(t, "http://"+th.HTTPAddr()+"/metrics", "")
	if !strings.Contains(body, `nanohost_node_duration_seconds_count{status="custom"} 3`) {
		t.Errorf("/metrics lacks the three custom outcomes under one label:\n%s", grepLines(body, "nanohost_node_duration_seconds_count"))
	}
	for _, w := range words {
		if strings.Contains(body, `status="`+w+`"`) {
			t.Errorf("/metrics has a series for the word %s", w)
		}
	}
}

func grepLines(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// A dashboard port another program holds stops the host with an error that
// names the setting to change (and the variable that overrides it), not a
// bare "bind: address already in use".
func TestPortInUseNamesTheSetting(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	h := unstartedHost(t, busy.Addr().String(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = h.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "http.listen") || !strings.Contains(err.Error(), "NANOHOST_HTTP_LISTEN") ||
		!strings.Contains(err.Error(), "the address is in use") {
		t.Fatalf("Run = %v", err)
	}
}

// With http.listen empty the host serves without an HTTP endpoint — it
// says so to OnReady with no address — and stops cleanly when asked.
func TestHostWithoutHTTPStopsCleanly(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ready := make(chan string, 1)
	h := unstartedHost(t, "", func(addr string) { ready <- addr; cancel() })
	runErr := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("panicked: %v", r)
			}
		}()
		return h.Run(ctx)
	}()
	if runErr != nil {
		t.Fatalf("Run = %v", runErr)
	}
	select {
	case addr := <-ready:
		if addr != "" {
			t.Errorf("OnReady got HTTP address %q with http.listen empty", addr)
		}
	default:
		t.Fatal("Run returned without ever serving")
	}
}

// unstartedHost is a host on its own SQLite file with the console on a
// pipe and its HTTP endpoint on listen ("" for none), not yet running.
func unstartedHost(t *testing.T, listen string, onReady func(addr string)) *Host {
	t.Helper()
	cfg := config.Defaults()
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.HTTP.Listen = listen
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(context.Background(), cfg.DatabasePath())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	inR, inW := io.Pipe()
	t.Cleanup(func() { inW.Close() })
	h, err := New(Options{Config: cfg, Store: st, Agents: &fakeAgents{answer: succeed}, Logger: quiet, OnReady: onReady,
		Endpoints: []Endpoint{{Channel: console.New(inR, io.Discard), Policy: console.Policy()}}})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// pingFunc is a Pinger.
type pingFunc func(context.Context) error

func (f pingFunc) Ping(ctx context.Context) error { return f(ctx) }

// With the agents on Kubernetes, /healthz checks the cluster (not Docker)
// and fails, with the reason, while the runtime cannot reach its pods.
func TestHealthChecksTheClusterWhenAgentsRunOnKubernetes(t *testing.T) {
	var down atomic.Bool
	th := launch(t, hostSetup{answer: succeed, kube: pingFunc(func(context.Context) error {
		if down.Load() {
			return errors.New("list pods in namespace agents: connection refused")
		}
		return nil
	})})
	base := "http://" + th.HTTPAddr()
	code, body := get(t, base+"/healthz", "")
	if code != http.StatusOK || !strings.Contains(body, `"kubernetes":"ok"`) || strings.Contains(body, `"docker"`) {
		t.Errorf("/healthz = %d %s; want the cluster ok and no Docker", code, body)
	}
	down.Store(true)
	code, body = get(t, base+"/healthz", "")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `"kubernetes":"list pods in namespace agents: connection refused"`) {
		t.Errorf("/healthz with the cluster down = %d %s; want 503 with the reason", code, body)
	}
}
