package container

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/frontend"
	"nanohost/internal/pipeline/lint"
)

// standIn writes an executable stand-in for an agent CLI into the
// workspace's bin/: it answers with its own name and the arguments it got.
func standIn(t *testing.T, workspace, name string) string {
	t.Helper()
	dir := filepath.Join(workspace, "bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\ncat >/dev/null\necho \"" + name + " got: $*\"\necho '[outcome:success]'\n"
	if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		os.Chown(dir, 1000, 1000)
		os.Chown(filepath.Join(dir, name), 1000, 1000)
	}
	return "/workspace/group/bin/" + name
}

// Each node reaches the agent its stylesheet's llm_provider names, with
// its llm_model and reasoning_effort in that tool's own flags; a provider
// no agent serves is a lint error naming the configured ones, and refused
// at run time too.
func TestProviderPicksTheAgent(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) {
		c.Agents = map[string]AgentConfig{
			"openai": {Kind: "command", Command: standIn(t, c.Workspace, "codex") + " exec"},
			"google": {Kind: "command", Command: standIn(t, c.Workspace, "gemini") + " --yolo"},
		}
	})
	src := []byte(`digraph providers {
		graph [model_stylesheet="* { llm_provider: openai; llm_model: gpt-5; reasoning_effort: high; }
		                         .review { llm_provider: google; llm_model: gemini-2.5-pro; }"]
		start  [shape=Mdiamond]
		plan   [prompt="plan it"]
		review [prompt="review it", class="review"]
		exit   [shape=Msquare]
		start -> plan -> review -> exit
	}`)
	agents := &lint.Agents{Providers: []string{"google", "openai"}}
	g, diags, err := frontend.Prepare("providers.dot", src, frontend.Options{KnownTypes: engine.BuiltinTypes(), Agents: agents})
	if err != nil || pipeline.HasErrors(diags) {
		t.Fatalf("pipeline: %v %v", err, diags)
	}
	logs := t.TempDir()
	eng := engine.New(engine.Config{Backend: h.b, LogsRoot: logs, RunID: "run-providers", NoBackoff: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := eng.Run(ctx, g, src, "providers.dot")
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != engine.StateSuccess {
		t.Fatalf("run %s: %s\nlogs:\n%s", res.Status, res.FailureReason, h.logs.String())
	}
	for node, want := range map[string]string{
		"plan":   "codex got: exec --model gpt-5 -c model_reasoning_effort=high",
		"review": "gemini got: --yolo --model gemini-2.5-pro",
	} {
		got, _ := os.ReadFile(filepath.Join(logs, node, "response.md"))
		if !strings.Contains(string(got), want) {
			t.Errorf("%s's response = %q, want the agent saying %q", node, got, want)
		}
	}

	// A provider no agent serves: lint names the configured ones…
	bad := []byte(strings.Replace(string(src), "llm_provider: google", "llm_provider: mistral", 1))
	_, diags, _ = frontend.Prepare("providers.dot", bad, frontend.Options{KnownTypes: engine.BuiltinTypes(), Agents: agents})
	var found bool
	for _, d := range diags {
		if d.Rule == "provider_known" && d.Severity == pipeline.SeverityError && d.NodeID == "review" &&
			strings.Contains(d.Message, `"mistral"`) && strings.Contains(d.Message, "google, openai") {
			found = true
		}
	}
	if !found {
		t.Errorf("no provider_known error for mistral naming google, openai: %v", diags)
	}
	// …and the backend refuses it, typed, rather than run another agent.
	_, err = h.b.Run(ctx, engine.Request{Kind: engine.KindCodergen, RunID: "run-providers-2", NodeID: "review", Provider: "mistral", Prompt: "x"})
	var noAgent *NoAgentError
	if !errors.As(err, &noAgent) || noAgent.Provider != "mistral" || strings.Join(noAgent.Configured, ",") != "google,openai" {
		t.Errorf("run with an unmapped provider: %v", err)
	}
}
