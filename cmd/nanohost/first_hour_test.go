package main

import (
	"os/exec"
	"path/filepath"
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
