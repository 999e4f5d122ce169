package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"nanohost/internal/container"
	"nanohost/internal/container/containertest"
)

// requireDemoOnly skips unless Docker has the offline demo image and not
// the Claude Code one (the machine of someone who ran scripts/serve.sh).
func requireDemoOnly(t *testing.T) {
	t.Helper()
	containertest.Require(t)
	if containertest.Image != container.DemoImage {
		t.Skipf("the test image is %s, not the demo image %s", containertest.Image, container.DemoImage)
	}
	if exec.Command("docker", "image", "inspect", container.DefaultImage).Run() == nil {
		t.Skipf("%s is built here: the demo fallback does not apply", container.DefaultImage)
	}
}

// Issue 30, item 1: `config check` (and serve, which makes the same checks)
// checks the configured agent image and says exactly how to get it — and,
// where scripts/serve.sh built the demo image, how to start on it again.
func TestConfigCheckNamesTheMissingAgentImage(t *testing.T) {
	requireDemoOnly(t)
	t.Setenv("ANTHROPIC_API_KEY", "sk-test")
	r := runNanohostIn(t, t.TempDir(), "config", "check")
	for _, want := range []string{
		"warning: runtime.image: " + container.DefaultImage + " is not in Docker: every agent stage waits for it",
		"scripts/serve.sh started the host on the offline demo image " + container.DemoImage,
		"NANOHOST_IMAGE=" + container.DemoImage + " NANOHOST_AGENT=script NANOHOST_AGENT_SCRIPT=examples/demo.script.json",
		"docker build -t " + container.DefaultImage + " .",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("config check does not say %q:\n%s", want, r.stdout)
		}
	}
	if r.code != 0 {
		t.Errorf("a missing image is a warning (the host starts, runs wait): exit %d", r.code)
	}

	t.Setenv("NANOHOST_IMAGE", container.DemoImage)
	t.Setenv("NANOHOST_AGENT", "script")
	t.Setenv("NANOHOST_AGENT_SCRIPT", repoFile(t, "examples", "demo.script.json"))
	if r := runNanohostIn(t, t.TempDir(), "config", "check"); strings.Contains(r.stdout, "runtime.image") {
		t.Errorf("config check warns about the demo image that is there:\n%s", r.stdout)
	}
}

// Issue 30, item 2: the README's `pipeline run … --backend docker --script
// S.json` works on a demo machine: without --image, and without the Claude
// Code image, it runs on the demo image and says so; an image that is not
// there is refused before the run with how to get it.
func TestDockerRunWithoutImageUsesTheDemoImage(t *testing.T) {
	requireDemoOnly(t)
	dir := t.TempDir()
	dot := writeFile(t, dir, "smoke.dot", smokeDOT)
	script := writeFile(t, dir, "smoke.json", smokeScript)
	base := []string{"pipeline", "run", dot, "--backend", "docker", "--script", script,
		"--workspace", containertest.Workspace(t), "--state-dir", t.TempDir(), "--network", "none"}
	r := runNanohost(t, "", append(base, "--logs", filepath.Join(dir, "run1"))...)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "using the offline demo image "+container.DemoImage) {
		t.Errorf("the run does not say which image it used:\n%s", r.stderr)
	}

	r = runNanohost(t, "", append(base, "--logs", filepath.Join(dir, "run2"), "--image", "nanohost-agent:absent")...)
	if r.code == 0 || !strings.Contains(r.stderr, "image not found: nanohost-agent:absent") ||
		!strings.Contains(r.stderr, "scripts/test-image.sh builds "+container.DemoImage) {
		t.Errorf("a missing --image: exit %d\n%s", r.code, r.stderr)
	}
}

// Issue 30, item 8: a mistyped subcommand or flag exits 2 with the near
// one — never help and exit 0, which would let a typo in CI pass — and a
// pipeline subcommand typed at the top level points at `pipeline run`.
func TestCLITyposExit2WithDidYouMean(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"pipeline", "valdate", "x.dot"}, "did you mean `nanohost pipeline validate`?"},
		{[]string{"runs", "lst"}, "did you mean `nanohost runs list`?"},
		{[]string{"config", "chek"}, "did you mean `nanohost config check`?"},
		{[]string{"run", "x.dot"}, "did you mean `nanohost pipeline run`"},
		{[]string{"validate", "x.dot"}, "did you mean `nanohost pipeline validate`"},
		{[]string{"pipeline", "validate", "--strct", "x.dot"}, "unknown flag: --strct (did you mean --strict?)"},
		{[]string{"pipeline", "run", "x.dot", "--backnd", "sim"}, "(did you mean --backend?)"},
	} {
		r := runNanohost(t, "", tc.args...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("nanohost %s: exit %d, stderr %q; want exit 2 saying %q", strings.Join(tc.args, " "), r.code, r.stderr, tc.want)
		}
		if strings.Contains(r.stdout, "Available Commands") {
			t.Errorf("nanohost %s printed help on stdout:\n%s", strings.Join(tc.args, " "), r.stdout)
		}
	}
	if r := runNanohost(t, "", "pipeline"); r.code != 0 || !strings.Contains(r.stdout, "validate") {
		t.Errorf("nanohost pipeline (no subcommand) should show its commands: exit %d\n%s", r.code, r.stdout)
	}
}

// Issue 30, item 8: `pipeline validate` takes several files (and quoted
// globs), prints each file's problems and a summary; the exit status is
// the worst of them.
func TestValidateTakesSeveralFilesAndSummarises(t *testing.T) {
	dir := t.TempDir()
	good := writeFile(t, dir, "a.dot", smokeDOT)
	writeFile(t, dir, "b.dot", smokeDOT)
	bad := writeFile(t, dir, "c.dot", `digraph C { start [shape=Mdiamond]; work [prompt="x"]; start -> work }`)
	r := runNanohost(t, "", "pipeline", "validate", filepath.Join(dir, "*.dot"))
	if r.code != 2 {
		t.Errorf("a glob with one invalid file: exit %d, want 2\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{good + ": valid", bad + ":", "3 files: 2 valid; 1 invalid: " + bad} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("validate of three files does not say %q:\n%s", want, r.stdout)
		}
	}
	r = runNanohost(t, "", "pipeline", "validate", good, filepath.Join(dir, "b.dot"))
	if r.code != 0 || !strings.Contains(r.stdout, "2 files: 2 valid") {
		t.Errorf("two valid files: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runNanohost(t, "", "pipeline", "validate", good, filepath.Join(dir, "missing.dot"), "--json")
	if r.code != 1 || !strings.Contains(r.stdout, `"file": "`+good+`"`) || !strings.Contains(r.stdout, `"error": "read pipeline`) {
		t.Errorf("--json with an unreadable file: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// Issue 30, item 11: the demo is honest — its scripted agents change no
// file, so no answer claims one was changed; the one that would says so.
func TestDemoClaimsNoChangeItDoesNotMake(t *testing.T) {
	dir := t.TempDir()
	logs := filepath.Join(dir, "run")
	r := runNanohost(t, "", "pipeline", "run", repoFile(t, "examples", "demo.dot"), "--backend", "script",
		"--script", repoFile(t, "examples", "demo.script.json"), "--logs", logs, "--auto-approve", "--json")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	claims := regexp.MustCompile(`(?i)\b(added|edited|wrote|now greets)\b`)
	for _, node := range []string{"plan", "implement", "ship"} {
		data, err := os.ReadFile(filepath.Join(logs, node, "response.md"))
		if err != nil {
			t.Fatal(err)
		}
		if m := claims.FindString(string(data)); m != "" {
			t.Errorf("%s's answer claims a change (%q) the demo does not make:\n%s", node, m, data)
		}
	}
	implement, _ := os.ReadFile(filepath.Join(logs, "implement", "response.md"))
	if !strings.Contains(string(implement), "nothing in the workspace changed") {
		t.Errorf("implement does not say the demo changed nothing:\n%s", implement)
	}
}

// Issue 30, item 13: a gate asked on the terminal is asked once — with its
// menu — not as a log line and then again as the menu; its answer is still
// told in the log.
func TestCLIInteractiveGateAsksOnce(t *testing.T) {
	dir := t.TempDir()
	dot := writeFile(t, dir, "review.dot", `digraph Review {
		start [shape=Mdiamond]; exit [shape=Msquare]
		review [shape=hexagon, label="Ship the greeting?"]; ship [prompt="ship"]; fix [prompt="fix"]
		start -> review; review -> ship [label="[A] Approve"]; review -> fix [label="[F] Fix"]; ship -> exit; fix -> exit
	}`)
	r := runNanohost(t, "A\n", "pipeline", "run", dot, "--backend", "sim", "--logs", filepath.Join(dir, "run"))
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if n := len(regexp.MustCompile(`\?\]? Ship the greeting\?`).FindAllString(r.stdout+r.stderr, -1)); n != 1 {
		t.Errorf("the question was shown %d times; want once:\nstdout:\n%s\nstderr:\n%s", n, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "[A] Approve") || !strings.Contains(r.stdout, "✓ Pipeline complete") {
		t.Errorf("the log does not tell the answer and the end:\n%s", r.stdout)
	}
}
