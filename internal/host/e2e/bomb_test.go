package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"nanohost/internal/pipeline/pipelinetest"
	"nanohost/internal/runs"
	"nanohost/internal/testkit"
)

// idleServeSetup prepares a directory for `nanohost serve` with the console
// and script agents that just succeed: the binary, the directory and the
// configuration file.
func idleServeSetup(t *testing.T) (bin, dir, conf string) {
	t.Helper()
	requireDocker(t)
	bin, dir = nanohostBinary(t), t.TempDir()
	script := writeScript(t, dir, map[string]any{"default": "[outcome:success]"})
	return bin, dir, consoleServeConfig(t, dir, script)
}

// An agent drops the bomb into a running `nanohost serve`: the host stays
// up, small (peak RSS), answers the agent with the diagnostic naming the
// limit, quarantines the file with the reason, tells the group's chat, and
// goes on answering requests.
func TestExpansionBombOverIPCIsQuarantinedAndTheHostStaysUp(t *testing.T) {
	t.Parallel()
	bin, dir, conf := idleServeSetup(t)
	data := filepath.Join(dir, "data")
	// A 4 GiB address-space limit: should the bound ever break, the host
	// dies of it instead of taking the machine's memory.
	limited := filepath.Join(dir, "nanohost-limited")
	wrapper := fmt.Sprintf("#!/bin/sh\nulimit -v 4194304 && exec %q \"$@\"\n", bin)
	if err := os.WriteFile(limited, []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	p := startServe(t, limited, dir, os.Environ(), "--config", conf)
	defer p.terminate(t, true)
	p.screen.WaitFor(t, "nanohost is ready", 1, 30*time.Second)
	p.screen.WaitFor(t, "Dashboard: http://127.0.0.1:", 1, time.Second)
	dashboard := regexp.MustCompile(`Dashboard: (http://127\.0\.0\.1:\d+/)`).FindStringSubmatch(p.screen.Text())[1]

	bomb := pipelinetest.ExpansionBomb()
	writeIPCRequest(t, data, "main", "tasks", "bomb-1", map[string]any{"type": "start_pipeline", "dot": bomb})
	resp := readResponse(t, data, "main", "bomb-1")
	diags, _ := resp["diagnostics"].([]any)
	if resp["status"] != "rejected" || len(diags) != 1 {
		t.Fatalf("the bomb's answer: %.2000v", resp)
	}
	d, _ := diags[0].(map[string]any)
	if d["rule"] != "expansion_limit" || !strings.Contains(fmt.Sprint(d["message"]), "over the 16 MiB limit on a prepared pipeline (MaxExpandedSize)") {
		t.Errorf("diagnostic %v", d)
	}
	quarantined := filepath.Join(data, "ipc", "errors", "main", "tasks-bomb-1.json")
	testkit.WaitUntil(t, 10*time.Second, "the bomb is quarantined", func() bool {
		reason, err := os.ReadFile(quarantined + ".reason")
		return err == nil && strings.HasPrefix(string(reason), "amplification: expanding $goal would make the pipeline 46.6 GiB")
	})
	if fi, err := os.Stat(quarantined); err != nil || fi.Size() < 500_000 {
		t.Errorf("the quarantined file: %v %v", fi, err)
	}
	p.screen.WaitFor(t, "An IPC request from this group's agent was rejected (tasks/bomb-1.json)", 1, 10*time.Second)

	// Still up: alive, healthy, and answering the next request.
	if err := p.cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("nanohost serve is gone: %v", err)
	}
	res, err := http.Get(dashboard + "healthz")
	if err != nil {
		t.Fatalf("/healthz after the bomb: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("/healthz after the bomb: %s", res.Status)
	}
	writeIPCRequest(t, data, "main", "messages", "after-bomb", map[string]any{"type": "send_message", "text": "still here"})
	if r := readResponse(t, data, "main", "after-bomb"); r["status"] != "accepted" {
		t.Errorf("a message after the bomb: %v", r)
	}
	p.screen.WaitFor(t, "still here", 1, 10*time.Second)

	peak := peakRSS(t, p.cmd.Process.Pid)
	t.Logf("nanohost serve peak RSS after refusing the bomb: %.1f MB", float64(peak)/1e6)
	if peak > 300e6 {
		t.Errorf("peak RSS %.0f MB, want under 300 MB", float64(peak)/1e6)
	}
}

// peakRSS is a live process's high-water mark of resident memory (VmHWM).
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^VmHWM:\s+(\d+) kB`).FindSubmatch(status)
	if m == nil {
		t.Fatalf("no VmHWM in /proc/%d/status", pid)
	}
	kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return kb * 1024
}

// A request that killed the host twice while it was being handled is found
// claimed at the next start, with its attempt marker saying so (the ipc
// package's crash tests kill real processes to get there; here the files
// are what two such deaths leave behind). `nanohost serve` quarantines it
// instead of handling it a third time, tells the agent and the group's
// chat, and serves on.
func TestPoisonRequestLeftByCrashesIsQuarantinedAtStart(t *testing.T) {
	t.Parallel()
	bin, dir, conf := idleServeSetup(t)
	data := filepath.Join(dir, "data")
	processing := filepath.Join(data, "ipc", ".processing", "main")
	for _, d := range []string{filepath.Join(processing, "tasks"), filepath.Join(processing, ".attempts")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	req := `{"v":1,"type":"start_pipeline","request_id":"killer","dot":"digraph K { start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit }"}`
	if err := os.WriteFile(filepath.Join(processing, "tasks", "killer.json"), []byte(req), 0o600); err != nil {
		t.Fatal(err)
	}
	marker := `{"attempts":2,"last":"2026-01-02T03:04:05Z","pid":4242}`
	if err := os.WriteFile(filepath.Join(processing, ".attempts", "tasks-killer.json"), []byte(marker), 0o600); err != nil {
		t.Fatal(err)
	}

	p := startServe(t, bin, dir, os.Environ(), "--config", conf)
	defer p.terminate(t, true)
	p.screen.WaitFor(t, "nanohost is ready", 1, 30*time.Second)
	resp := readResponse(t, data, "main", "killer")
	if resp["status"] != "rejected" || !strings.Contains(fmt.Sprint(resp["reason"]), "the host stopped 2 times while handling this request") {
		t.Fatalf("answer: %v", resp)
	}
	p.screen.WaitFor(t, "An IPC request from this group's agent was rejected (tasks/killer.json): the host stopped 2 times", 1, 10*time.Second)
	reason, err := os.ReadFile(filepath.Join(data, "ipc", "errors", "main", "tasks-killer.json.reason"))
	if err != nil || !strings.Contains(string(reason), "poison: the host died 2 times while handling this request (the last attempt began at 2026-01-02T03:04:05Z in process 4242)") {
		t.Errorf("quarantine reason %q (%v)", reason, err)
	}
	st := readStore(t, data)
	if page, err := st.ListRuns(context.Background(), runs.Filter{}); err != nil || len(page.Runs) != 0 {
		t.Errorf("runs %+v (%v): the poison request must not start one", page.Runs, err)
	}
	writeIPCRequest(t, data, "main", "messages", "after", map[string]any{"type": "send_message", "text": "serving on"})
	p.screen.WaitFor(t, "serving on", 1, 10*time.Second)
}
