package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// inDir runs the test in a fresh working directory, since Load reads ./.env and ./nanohost.yaml.
func inDir(t *testing.T) string {
	dir := t.TempDir()
	t.Chdir(dir)
	return dir
}

func TestDefaultsWithoutAnyFile(t *testing.T) {
	inDir(t)
	c, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	if c.DataDir != "data" || c.DatabasePath() != filepath.Join("data", "nanohost.db") {
		t.Errorf("data dir %q db %q", c.DataDir, c.DatabasePath())
	}
	if !c.ConsoleEnabled() || c.Slack.Enabled() {
		t.Errorf("want the console channel and no Slack by default")
	}
	if c.Runtime.Kind != "docker" || c.Runtime.MaxContainers != 5 {
		t.Errorf("runtime %+v", c.Runtime)
	}
	if Blocking(c.Check()) {
		t.Errorf("defaults must start: %v", c.Check())
	}
}

func TestYAMLEnvAndDotEnvLayering(t *testing.T) {
	dir := inDir(t)
	os.WriteFile(filepath.Join(dir, ".env"), []byte("# secrets\nexport ANTHROPIC_API_KEY=\"sk-test\"\nSLACK_BOT_TOKEN=xoxb-from-dotenv\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "nanohost.yaml"), []byte(`
data_dir: /srv/nano
runtime:
  max_containers: 3
  idle_timeout: 90s
slack:
  app_token: ${TEST_APP_TOKEN}
  policy:
    channels: [C1]
    starters: [U1]
groups:
  - {folder: main, chat: "slack:C1", main: true}
`), 0o600)
	t.Setenv("TEST_APP_TOKEN", "xapp-expanded")
	t.Setenv("NANOHOST_MAX_CONTAINERS", "7")
	t.Setenv("SLACK_BOT_TOKEN", "") // unset-ish: .env must not override a variable that is set
	c, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	if c.DataDir != "/srv/nano" || c.Runtime.IdleTimeout != 90*time.Second {
		t.Errorf("yaml not applied: %+v", c)
	}
	if c.Runtime.MaxContainers != 7 {
		t.Errorf("env override: max_containers = %d, want 7", c.Runtime.MaxContainers)
	}
	if c.Slack.AppToken.Reveal() != "xapp-expanded" {
		t.Errorf("${VAR} expansion: %q", c.Slack.AppToken.Reveal())
	}
	if c.Slack.BotToken != "" {
		t.Errorf(".env overrode a variable already in the environment")
	}
	if got := c.AgentSecretValues()["ANTHROPIC_API_KEY"].Reveal(); got != "sk-test" {
		t.Errorf("agent secret from .env = %q", got)
	}
	os.Unsetenv("ANTHROPIC_API_KEY")
}

func TestMisspeltKeyNamesTheLine(t *testing.T) {
	dir := inDir(t)
	path := filepath.Join(dir, "bad.yaml")
	os.WriteFile(path, []byte("runtime:\n  max_contaners: 3\n"), 0o600)
	_, err := Load(path)
	if err == nil || !strings.Contains(err.Error(), "line 2") || !strings.Contains(err.Error(), "max_contaners") {
		t.Fatalf("err = %v", err)
	}
}

func TestExplicitMissingFileIsAnError(t *testing.T) {
	inDir(t)
	if _, err := Load("nope.yaml"); err == nil {
		t.Fatal("want an error for a missing --config file")
	}
}

func TestCheckExplainsProblems(t *testing.T) {
	c := Defaults()
	c.HTTP.Listen = "0.0.0.0:8377"
	c.Slack.BotToken = "bad"
	c.Runtime.Agent = "script"
	c.Groups = []Group{{Folder: "Bad Name", Chat: "C1", Main: true}, {Folder: "x", Chat: "slack:C2", Main: true}}
	got := map[string]Problem{}
	for _, p := range c.Check() {
		got[p.Field] = p
	}
	for _, field := range []string{"http.listen", "slack.bot_token", "slack.app_token", "slack.policy", "runtime.script", "groups[0].folder", "groups[0].chat", "groups"} {
		p, ok := got[field]
		if !ok {
			t.Errorf("no problem reported for %s; got %v", field, c.Check())
			continue
		}
		if !p.Blocking || p.Fix == "" {
			t.Errorf("%s: %+v should block and say how to fix", field, p)
		}
	}
}

func TestSecretsNeverPrint(t *testing.T) {
	s := Secret("xoxb-very-secret")
	for _, out := range []string{s.String(), s.LogValue().String()} {
		if strings.Contains(out, "very-secret") {
			t.Fatalf("secret leaked: %q", out)
		}
	}
	b, _ := s.MarshalJSON()
	if strings.Contains(string(b), "very-secret") {
		t.Fatalf("secret leaked in JSON: %s", b)
	}
}
