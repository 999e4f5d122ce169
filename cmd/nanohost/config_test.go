package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// configDir is a working directory holding the commented example as
// nanohost.yaml, and env as its .env.
func configDir(t *testing.T, env string) string {
	t.Helper()
	dir := t.TempDir()
	example, err := os.ReadFile(filepath.Join("..", "..", "nanohost.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "nanohost.yaml"), example, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".env"), []byte(env), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The commented example is a working configuration as it stands; with
// Slack tokens in .env, `config check` says exactly which policy settings
// to add (and that no group is on Slack, the console's no longer served), exits 1, and
// `serve` refuses to start with the same explanation.
func TestConfigCheckOfTheExample(t *testing.T) {
	for _, name := range []string{"SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"} {
		t.Setenv(name, "")
		os.Unsetenv(name)
	}
	r := runNanohostIn(t, configDir(t, "ANTHROPIC_API_KEY=sk-test\n"), "config", "check", "--offline")
	if r.code != 0 || !strings.Contains(r.stdout, "configuration: nanohost.yaml") || !strings.Contains(r.stdout, "ok: no problems") {
		t.Fatalf("the example as it stands: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	dir := configDir(t, "ANTHROPIC_API_KEY=sk-test\nSLACK_BOT_TOKEN=xoxb-1\nSLACK_APP_TOKEN=xapp-1\n")
	r = runNanohostIn(t, dir, "config", "check")
	// Each problem names the line of nanohost.yaml its setting is on.
	for _, want := range []string{
		`error: slack\.policy\.channels \(line \d+\): is empty`, `fix: set slack\.policy\.channels to the Slack channel ids`,
		`error: slack\.policy\.starters \(line \d+\): is empty, and so is slack\.policy\.approvers`,
		`warning: groups\[0\]\.chat \(line \d+\): "console:main" is on the console, which is off`,
		`warning: groups \(line \d+\): no group is on Slack`,
		`2 errors: nanohost serve will not start until they are fixed`,
	} {
		if !regexp.MustCompile(want).MatchString(r.stdout) {
			t.Errorf("config check does not say %q:\n%s", want, r.stdout)
		}
	}
	if r.code != 1 {
		t.Errorf("config check with blocking problems exited %d, want 1", r.code)
	}
	var out struct {
		OK       bool `json:"ok"`
		Problems []struct {
			Field    string `json:"field"`
			Blocking bool   `json:"blocking"`
		} `json:"problems"`
	}
	r = runNanohostIn(t, dir, "config", "check", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.OK || len(out.Problems) != 4 {
		t.Errorf("--json: %v %+v\n%s", err, out, r.stdout)
	}
	r = runNanohostIn(t, dir, "serve")
	if r.code != 2 || !strings.Contains(r.stderr, "error: slack.policy.channels") || !strings.Contains(r.stderr, "not starting until the configuration errors are fixed") {
		t.Errorf("serve with a blocking problem: exit %d\n%s", r.code, r.stderr)
	}

	// With log.format json, stderr is for a log collector: every line a
	// record, the problems included.
	t.Setenv("NANOHOST_LOG_FORMAT", "json")
	r = runNanohostIn(t, dir, "serve")
	var fields []string
	for _, line := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		var rec struct{ Level, Msg, Field, Fix string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.Msg == "" {
			t.Errorf("serve with a JSON log wrote a line that is not a record: %q", line)
			continue
		}
		if rec.Msg == "configuration problem" && rec.Fix != "" {
			fields = append(fields, rec.Level+" "+rec.Field)
		}
	}
	if r.code != 2 || strings.Join(fields, ", ") != "ERROR slack.policy.channels, ERROR slack.policy.starters, WARN groups[0].chat, WARN groups" {
		t.Errorf("serve with a JSON log: exit %d, problems logged %q\n%s", r.code, fields, r.stderr)
	}
}

// config check makes the checks serve makes: a file with several mistakes
// gets every one reported by both, at its line, and both refuse it.
func TestConfigCheckAndServeRefuseTheSameMistakes(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "nanohost.yaml"), []byte(`runtime:
  agent: script
  script: s.json
  memory: lots
  cpus: -3
  pids: 0
  imgae: custom
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "s.json"), []byte(`{"default": "[outcome:success]"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`error: runtime.memory (line 4): "lots" is not a size`,
		`error: runtime.cpus (line 5): is -3`,
		`error: runtime.pids (line 6): is 0`,
		`error: runtime.imgae (line 7): is not a setting nanohost knows (fix: did you mean runtime.image?`,
	}
	check := runNanohostIn(t, dir, "config", "check")
	serve := runNanohostIn(t, dir, "serve")
	for _, w := range want {
		if !strings.Contains(check.stdout, w) {
			t.Errorf("config check does not say %q:\n%s", w, check.stdout)
		}
		if !strings.Contains(serve.stderr, w) {
			t.Errorf("serve does not say %q:\n%s", w, serve.stderr)
		}
	}
	if check.code != 1 || serve.code != 2 || !strings.Contains(check.stdout, "4 errors") {
		t.Errorf("config check exit %d, serve exit %d; want 1 and 2\n%s", check.code, serve.code, check.stdout)
	}
	var out struct {
		Problems []struct {
			Field string `json:"field"`
			Line  int    `json:"line"`
		} `json:"problems"`
	}
	r := runNanohostIn(t, dir, "config", "check", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || len(out.Problems) != 4 || out.Problems[0].Field != "runtime.memory" || out.Problems[0].Line != 4 {
		t.Errorf("--json: %v %+v\n%s", err, out, r.stdout)
	}
}
