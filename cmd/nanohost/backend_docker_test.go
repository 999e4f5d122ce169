package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

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
	want := []string{"start", "recall", "triage", "resolve", "investigate", "resolve", "investigate", "correlate", "review", "approve", "report", "done"}
	if !slices.Equal(res.Path, want) {
		t.Errorf("path = %v, want %v", res.Path, want)
	}
	if res.Context["investigate.confidence"] != 0.9 || res.Context["human.gate.selected"] != "A" {
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

// The shadow court and the investigation's court path in real containers,
// answered by script agents.
func TestDockerBackendRunsTheShadowCourt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := writeFile(t, dir, "court.json", `{"nodes": {
		"verdict": ["Remanded. [context:court.verdict=remand] [outcome:remand]", "Affirmed. [context:court.verdict=affirm] [outcome:affirm]"]}}`)
	logs := filepath.Join(dir, "court")
	r, _ := dockerRun(t, courtDOT(t), "--script", s, "--logs", logs, "--json")
	res := decodeRun(t, r)
	want := []string{"start", "indict", "discover", "defend", "hearing", "verdict", "discover", "defend", "hearing", "verdict", "done"}
	if r.code != 0 || !slices.Equal(res.Path, want) || res.Context["court.verdict"] != "affirm" {
		t.Fatalf("exit %d path %v context %v\n%s", r.code, res.Path, res.Context, r.stderr)
	}
	if p, _ := os.ReadFile(filepath.Join(logs, "defend", "prompt.md")); !strings.HasPrefix(string(p), "## Persona: Abyss\n") {
		t.Errorf("defend/prompt.md starts %q", p)
	}

	ex := func(name string) string { return repoFile(t, "examples", name) }
	r, _ = dockerRun(t, ex("investigation-circuit.dot"), "--script", ex("investigation-circuit.court.script.json"),
		"--answers", ex("investigation-circuit.answers.json"), "--logs", filepath.Join(dir, "investigation"), "--json")
	res = decodeRun(t, r)
	if r.code != 0 || res.Context["court.verdict"] != "affirm" || !slices.Contains(res.Path, "indict") || res.Attempts["verdict"] != 2 {
		t.Errorf("investigation: exit %d path %v context %v", r.code, res.Path, res.Context)
	}
}

// --masks with --backend docker: the mask's folder passes --mount-allowlist
// and is mounted read-only in the container of the node wearing it only.
func TestDockerBackendMountsAMasksFolderForItsNodeOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	prior := filepath.Join(dir, "rca-db")
	if err := os.Mkdir(prior, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, prior, "rca-1.md", "holdover timeout\n")
	allow := writeFile(t, dir, "allow.json", `{"allowed_roots": [{"path": "`+dir+`"}]}`)
	masks := writeFile(t, dir, "masks.yaml", "masks:\n  recall:\n    nodes: [probe]\n    mounts: [\""+prior+":prior-rca\"]\n")
	dot := writeFile(t, dir, "p.dot", `digraph p {
		start  [shape=Mdiamond]
		probe  [shape=parallelogram, masks="recall", tool_command="cat /workspace/masks/recall/prior-rca/rca-1.md && ! touch /workspace/masks/recall/prior-rca/x 2>/dev/null"]
		after  [shape=parallelogram, tool_command="test ! -e /workspace/masks"]
		done   [shape=Msquare]
		start -> probe
		probe -> after [condition="outcome=success"]
		after -> done  [condition="outcome=success"]
	}`)
	s := writeFile(t, dir, "s.json", `{}`)
	logs := filepath.Join(dir, "run")
	r, _ := dockerRun(t, dot, "--script", s, "--masks", masks, "--mount-allowlist", allow, "--logs", logs, "--json")
	res := decodeRun(t, r)
	if r.code != 0 || !slices.Equal(res.Path, []string{"start", "probe", "after", "done"}) {
		t.Fatalf("exit %d path %v (%s)\n%s", r.code, res.Path, res.FailureReason, r.stderr)
	}
	if out, _ := os.ReadFile(filepath.Join(logs, "probe", "stdout.txt")); string(out) != "holdover timeout\n" {
		t.Errorf("probe/stdout.txt = %q", out)
	}

	// A folder the allowlist does not allow stops the run before it starts.
	outside := writeFile(t, dir, "outside.yaml", "masks:\n  recall:\n    nodes: [probe]\n    mounts: [\""+t.TempDir()+"\"]\n")
	r, _ = dockerRun(t, dot, "--script", s, "--masks", outside, "--mount-allowlist", allow, "--logs", filepath.Join(dir, "run2"), "--json")
	if r.code != 2 || !strings.Contains(r.stderr, "mask recall: mounts[0]") || !strings.Contains(r.stderr, "not under an allowed root") {
		t.Errorf("refused mask folder: exit %d\n%s", r.code, r.stderr)
	}
}

// A relative --logs works with --backend docker: the stage's artifacts are
// bound from the run directory, and Docker refuses a relative bind (the
// stage used to retry that refusal until its attempts ran out).
func TestDockerRunTakesARelativeLogsDirectory(t *testing.T) {
	containertest.Require(t)
	dir := t.TempDir()
	writeFile(t, dir, "tool.dot", `digraph T { start [shape=Mdiamond]; probe [shape=parallelogram, tool_command="echo probing"]; done [shape=Msquare]; start -> probe -> done }`)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, nanohostBin, "pipeline", "run", "tool.dot", "--backend", "docker", "--image", containertest.Image,
		"--workspace", containertest.Workspace(t), "--state-dir", t.TempDir(), "--network", "none", "--logs", "run", "--json")
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if out, err := cmd.Output(); err != nil {
		t.Fatalf("pipeline run --logs run: %v\n%s%s", err, out, stderr.String())
	}
	if out, _ := os.ReadFile(filepath.Join(dir, "run", "probe", "stdout.txt")); string(out) != "probing\n" {
		t.Errorf("run/probe/stdout.txt = %q", out)
	}
}
