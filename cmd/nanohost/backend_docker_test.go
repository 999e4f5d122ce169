package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"nanohost/internal/container/containertest"
	"nanohost/internal/pipeline/engine"
)

// dockerRun runs `nanohost pipeline run … --backend docker` with the test
// image, a fresh workspace and state directory, and checks afterwards that
// the run left no container behind.
func dockerRun(t *testing.T, args ...string) (cliResult, string) {
	t.Helper()
	containertest.Require(t)
	state := t.TempDir()
	ws := containertest.Workspace(t)
	full := append([]string{"pipeline", "run"}, args...)
	full = append(full, "--backend", "docker", "--image", containertest.Image, "--workspace", ws, "--state-dir", state, "--network", "none")
	r := runNanohost(t, "", full...)
	id, err := os.ReadFile(filepath.Join(state, "host-id"))
	if err == nil {
		out, err := exec.Command("docker", "ps", "-aq", "--filter", "label=nanohost.host="+strings.TrimSpace(string(id))).Output()
		if err != nil || strings.TrimSpace(string(out)) != "" {
			t.Errorf("containers left behind by the run: %q (%v)", out, err)
		}
	}
	return r, ws
}

func TestDockerBackendRunsTheSmokePipeline(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dot := writeFile(t, dir, "smoke.dot", smokeDOT)
	script := writeFile(t, dir, "smoke.json", smokeScript)
	logs := filepath.Join(dir, "docker-run")
	r, _ := dockerRun(t, dot, "--script", script, "--logs", logs, "--json")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	res := decodeRun(t, r)
	if res.Status != "success" || !slices.Equal(res.Path, []string{"start", "plan", "implement", "review", "done"}) {
		t.Fatalf("result = %+v", res)
	}
	for _, node := range []string{"plan", "implement", "review"} {
		for _, f := range []string{"prompt.md", "response.md", "status.json"} {
			if _, err := os.Stat(filepath.Join(logs, node, f)); err != nil {
				t.Errorf("artifact %s/%s: %v", node, f, err)
			}
		}
	}
	cp, err := engine.LoadCheckpoint(logs)
	if err != nil || cp.CurrentNode != "done" {
		t.Fatalf("checkpoint: %v, current node %q", err, cp.CurrentNode)
	}

	// Same JSON contract and the same run as the in-process script backend.
	ref := decodeRun(t, runNanohost(t, "", "pipeline", "run", dot, "--script", script, "--logs", filepath.Join(dir, "script-run"), "--json"))
	if !slices.Equal(res.Path, ref.Path) || !slices.Equal(res.CompletedNodes, ref.CompletedNodes) ||
		!reflect.DeepEqual(res.Attempts, ref.Attempts) || !reflect.DeepEqual(res.Context, ref.Context) {
		t.Errorf("docker and script backends disagree:\ndocker %+v\nscript %+v", res, ref)
	}
}

func TestDockerBackendRunsTheInvestigationCircuit(t *testing.T) {
	t.Parallel()
	root, _ := filepath.Abs("../..")
	ex := func(name string) string { return filepath.Join(root, "examples", name) }
	r, _ := dockerRun(t, ex("investigation-circuit.dot"), "--script", ex("investigation-circuit.script.json"),
		"--answers", ex("investigation-circuit.answers.json"), "--logs", filepath.Join(t.TempDir(), "run"), "--json")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	res := decodeRun(t, r)
	want := []string{"start", "recall", "triage", "resolve", "investigate", "resolve", "investigate", "correlate", "review", "report", "done"}
	if !slices.Equal(res.Path, want) {
		t.Errorf("path = %v, want %v", res.Path, want)
	}
	if res.Context["rca.confidence"] != "high" || res.Context["human.gate.selected"] != "A" {
		t.Errorf("context = %v", res.Context)
	}
}

func TestDockerBackendRoutesOnToolExitCodes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dot := writeFile(t, dir, "tool.dot", `digraph tool {
		start [shape=Mdiamond]
		probe [shape=parallelogram, tool_command="echo probing; test -f marker.txt"]
		found [prompt="report the marker"]
		missing [prompt="report its absence"]
		done [shape=Msquare]
		start -> probe
		probe -> found [condition="outcome=success"]
		probe -> missing [condition="outcome=fail"]
		found -> done
		missing -> done
	}`)
	script := writeFile(t, dir, "s.json", `{"default": "noted [outcome:success]"}`)
	logs := filepath.Join(dir, "run")
	r, _ := dockerRun(t, dot, "--script", script, "--logs", logs, "--json")
	res := decodeRun(t, r)
	if !slices.Equal(res.Path, []string{"start", "probe", "missing", "done"}) {
		t.Errorf("without the marker: path %v, want the fail edge to missing", res.Path)
	}
	if res.Context["tool.exit_code"] != float64(1) {
		t.Errorf("tool.exit_code = %v", res.Context["tool.exit_code"])
	}
	if out, _ := os.ReadFile(filepath.Join(logs, "probe", "stdout.txt")); strings.TrimSpace(string(out)) != "probing" {
		t.Errorf("probe/stdout.txt = %q", out)
	}
}

func TestDockerBackendFlagErrors(t *testing.T) {
	t.Parallel()
	dot := writeFile(t, t.TempDir(), "smoke.dot", smokeDOT)
	state := t.TempDir()
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"command without command line": {[]string{"--agent", "command"}, "--agent-command"},
		"unknown agent":                {[]string{"--agent", "gpt"}, `unknown --agent "gpt"`},
		"root as workspace":            {[]string{"--workspace", "/"}, "workspace is /"},
		"state inside workspace":       {[]string{"--workspace", state, "--state-dir", filepath.Join(state, "s")}, "inside the workspace"},
		"mount not allowed":            {[]string{"--workspace", t.TempDir(), "--mount", t.TempDir(), "--mount-allowlist", filepath.Join(state, "none.json")}, "allowed_roots"},
	} {
		args := append([]string{"pipeline", "run", dot, "--backend", "docker", "--state-dir", state}, tc.args...)
		r := runNanohost(t, "", args...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 mentioning %q", name, r.code, r.stderr, tc.want)
		}
	}
}

// Agents write to their workspace (by default the current directory), so a
// run directory there would let them plant files the engine reads — a
// status.json symlink, a forged checkpoint. Docker runs default to the state
// directory, and a run directory inside the workspace is refused.
func TestDockerBackendKeepsRunsOutOfTheWorkspace(t *testing.T) {
	t.Parallel()
	containertest.Require(t)
	dir := t.TempDir()
	dot := writeFile(t, dir, "smoke.dot", smokeDOT)
	script := writeFile(t, dir, "smoke.json", smokeScript)
	ws, state := containertest.Workspace(t), t.TempDir()
	base := []string{"pipeline", "run", dot, "--backend", "docker", "--image", containertest.Image, "--script", script,
		"--state-dir", state, "--network", "none", "--json"}

	r := runNanohostIn(t, ws, base...)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	res := decodeRun(t, r)
	if want := filepath.Join(state, "runs", res.RunID); res.LogsRoot != want {
		t.Errorf("run directory %s, want %s (under the state directory)", res.LogsRoot, want)
	}
	if entries, _ := os.ReadDir(ws); len(entries) != 0 {
		t.Errorf("the run wrote into the agents' workspace: %v", entries)
	}

	inside := runNanohostIn(t, ws, append(base, "--logs", filepath.Join(ws, "data", "runs", "r1"))...)
	if inside.code != 2 || !strings.Contains(inside.stderr, "inside the agents' workspace") {
		t.Errorf("--logs inside the workspace: exit %d, stderr %q; want exit 2 refusing it", inside.code, inside.stderr)
	}
	// The same through a symlink that points into the workspace.
	link := filepath.Join(t.TempDir(), "ws-link")
	if err := os.Symlink(ws, link); err != nil {
		t.Fatal(err)
	}
	viaLink := runNanohostIn(t, ws, append(base, "--logs", filepath.Join(link, "runs", "r2"))...)
	if viaLink.code != 2 || !strings.Contains(viaLink.stderr, "inside the agents' workspace") {
		t.Errorf("--logs through a symlink into the workspace: exit %d, stderr %q; want it refused", viaLink.code, viaLink.stderr)
	}
}
