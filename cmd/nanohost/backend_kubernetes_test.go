package main

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"nanohost/internal/container/containertest"
)

// The pipeline: two full-fidelity nodes sharing a thread, a tool
// node that exits 3, a compact node. (The tool sleeps between its stdout and
// stderr lines: two lines written in the same instant on different streams
// have no defined order in the combined output, on either runtime.)
const backendParityDOT = `digraph parity {
    graph [goal="Compare the runtimes"]
    start   [shape=Mdiamond]
    draft   [prompt="Draft it", fidelity="full", thread_id="t"]
    refine  [prompt="Refine it", fidelity="full", thread_id="t"]
    check   [shape=parallelogram, tool_command="echo checking; sleep 0.3; echo warn >&2; exit 3"]
    summary [prompt="Summarise", fidelity="compact"]
    fix     [prompt="Fix it"]
    done    [shape=Msquare]
    start -> draft -> refine -> check
    check -> summary [condition="context.tool.exit_code=3"]
    check -> fix     [condition="context.tool.exit_code!=3"]
    summary -> done
    fix -> done
}`

const backendParityScript = `{"nodes": {
  "draft":   ["first draft [outcome:success] [context:draft=v1]"],
  "refine":  [{"status": "success", "notes": "refined", "context_updates": {"refined": "yes"}}],
  "summary": ["all checked [outcome:success]"]
}}`

// `pipeline run --backend kubernetes` behaves like `--backend docker`: the
// same path, context and stage files.
func TestKubernetesBackendMatchesDocker(t *testing.T) {
	kubeconfig := containertest.RequireKubernetes(t)
	dir := t.TempDir()
	dot := writeFile(t, dir, "parity.dot", backendParityDOT)
	script := writeFile(t, dir, "parity.json", backendParityScript)

	dockerLogs := filepath.Join(dir, "docker")
	d, _ := dockerRun(t, dot, "--script", script, "--logs", dockerLogs, "--json")
	if d.code != 0 {
		t.Fatalf("docker run: exit %d\n%s%s", d.code, d.stdout, d.stderr)
	}

	kubeLogs := filepath.Join(dir, "kubernetes")
	k := runNanohost(t, "", "pipeline", "run", dot, "--script", script, "--logs", kubeLogs, "--json",
		"--backend", "kubernetes", "--kubeconfig", kubeconfig, "--namespace", kubeNamespace(t, kubeconfig),
		"--image", containertest.Image, "--image-pull-policy", "Never", "--workspace", containertest.Workspace(t),
		"--state-dir", t.TempDir(), "--network", "none", "--memory", "256m", "--cpus", "0.5")
	if k.code != 0 {
		t.Fatalf("kubernetes run: exit %d\n%s%s", k.code, k.stdout, k.stderr)
	}

	dr, kr := decodeRun(t, d), decodeRun(t, k)
	if want := []string{"start", "draft", "refine", "check", "summary", "done"}; !slices.Equal(dr.Path, want) {
		t.Fatalf("docker path %v, want %v", dr.Path, want)
	}
	if !slices.Equal(kr.Path, dr.Path) || kr.Status != dr.Status {
		t.Errorf("kubernetes: %s along %v; docker: %s along %v", kr.Status, kr.Path, dr.Status, dr.Path)
	}
	dropRunSpecific := func(c map[string]any) map[string]any {
		out := map[string]any{}
		for key, v := range c {
			if !strings.HasPrefix(key, "internal.") && key != "run_id" && key != "logs_root" {
				out[key] = v
			}
		}
		return out
	}
	if dc, kc := dropRunSpecific(dr.Context), dropRunSpecific(kr.Context); !reflect.DeepEqual(dc, kc) {
		t.Errorf("context differs:\ndocker     %v\nkubernetes %v", dc, kc)
	}
	if dr.Context["draft"] != "v1" || dr.Context["refined"] != "yes" || dr.Context["tool.exit_code"] != float64(3) {
		t.Errorf("context %v lacks the agents' updates or the tool's exit code", dr.Context)
	}
	df, kf := stageFiles(t, dockerLogs), stageFiles(t, kubeLogs)
	for _, name := range slices.Sorted(maps.Keys(df)) {
		if kf[name] != df[name] {
			t.Errorf("%s differs:\ndocker     %q\nkubernetes %q", name, df[name], kf[name])
		}
	}
	for name := range kf {
		if _, ok := df[name]; !ok {
			t.Errorf("%s only in the kubernetes run", name)
		}
	}
	if df["check/stdout.txt"] != "checking\n" || df["check/stderr.txt"] != "warn\n" {
		t.Errorf("tool output files: %q %q", df["check/stdout.txt"], df["check/stderr.txt"])
	}
}

// stageFiles reads every stage file of a run (node/file → content), minus
// what differs between any two runs (timings, ids).
func stageFiles(t *testing.T, logs string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(logs, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(logs, p)
		if !strings.Contains(rel, "/") || strings.HasSuffix(rel, ".jsonl") {
			return nil // run-level files: manifest, checkpoint, event log
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[rel] = string(data)
		return nil
	})
	if len(out) == 0 {
		t.Fatalf("no stage files under %s", logs)
	}
	return out
}

func kubeNamespace(t *testing.T, kubeconfig string) string {
	cs, _, err := containertest.KubeClient(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return containertest.Namespace(t, cs)
}
