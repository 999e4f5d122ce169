package config

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"nanohost/internal/channels/slack"
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
	if c.Workspaces.Spares != 1 {
		t.Errorf("workspaces.spares %d, want 1 spare tree by default", c.Workspaces.Spares)
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

// A file with several mistakes is read to its end: every one is a problem
// at its own line — misspelt keys with a did-you-mean on that key's line,
// values of the wrong type, values serve would refuse — alongside the
// other checks, not an error that stops at the first.
func TestEveryProblemAtOnceAtItsLine(t *testing.T) {
	dir := inDir(t)
	path := filepath.Join(dir, "bad.yaml")
	os.WriteFile(path, []byte(`data_dir: data
runtime:
  memory: lots
  cpus: -3
  pids: 0
  max_contaners: 3
  max_containers: many
  idle_timeout: soon
http:
  listen: "127.0.0.1:8377"
groups:
  - folder: main
    chat: "console:main"
    mian: true
`), 0o600)
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		line     int
		msg, fix string
	}{
		"runtime.memory":         {3, `"lots" is not a size`, "512m or 2g"},
		"runtime.cpus":           {4, "is -3", "set it to 1"},
		"runtime.pids":           {5, "is 0", "512"},
		"runtime.max_contaners":  {6, "is not a setting", "did you mean runtime.max_containers?"},
		"runtime.max_containers": {7, `"many" is not a whole number`, "number"},
		"runtime.idle_timeout":   {8, `"soon" is not a duration`, "90s or 10m"},
		"groups[0].mian":         {14, "is not a setting", "did you mean groups[0].main?"},
	}
	got := map[string]Problem{}
	for _, p := range c.Check() {
		got[p.Field] = p
	}
	for field, w := range want {
		p, ok := got[field]
		if !ok {
			t.Errorf("no problem for %s; got %v", field, c.Check())
			continue
		}
		line, env := c.Locate(p)
		if line != w.line || env != "" || !p.Blocking || !strings.Contains(p.Message, w.msg) || !strings.Contains(p.Fix, w.fix) {
			t.Errorf("%s: line %d %q, want line %d with %q and a fix with %q", field, line, c.Explain(p), w.line, w.msg, w.fix)
		}
	}
	if len(got) != len(want)+1 { // and agent_secrets: no API key
		t.Errorf("problems: %v", c.Check())
	}
	p := got["runtime.memory"]
	if s := c.Explain(p); !strings.HasPrefix(s, `error: runtime.memory (line 3): "lots" is not a size (fix: `) {
		t.Errorf("Explain = %q", s)
	}
}

// A value set by an environment variable is blamed on the variable, not
// on the line of the file it overrides.
func TestProblemFromTheEnvironmentNamesTheVariable(t *testing.T) {
	dir := inDir(t)
	path := filepath.Join(dir, "nanohost.yaml")
	os.WriteFile(path, []byte("http:\n  listen: 127.0.0.1:8377\n"), 0o600)
	t.Setenv("NANOHOST_HTTP_LISTEN", "nowhere")
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range c.Check() {
		if p.Field == "http.listen" {
			if line, env := c.Locate(p); line != 0 || env != "NANOHOST_HTTP_LISTEN" || !strings.HasPrefix(c.Explain(p), "error: http.listen (NANOHOST_HTTP_LISTEN): ") {
				t.Errorf("line %d env %q: %s", line, env, c.Explain(p))
			}
			return
		}
	}
	t.Errorf("no http.listen problem: %v", c.Check())
}

// YAML that does not parse at all still stops the reading, with its line.
func TestBrokenYAMLIsAnErrorWithItsLine(t *testing.T) {
	dir := inDir(t)
	path := filepath.Join(dir, "bad.yaml")
	os.WriteFile(path, []byte("runtime:\n  memory: 2g\n cpus: 1\n"), 0o600)
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "bad.yaml: yaml: line 2") {
		t.Fatalf("err = %v", err)
	}
}

// The limits serve hands on to Docker are checked as it would take them.
func TestLimitsServeWouldRefuse(t *testing.T) {
	for _, tc := range []struct {
		field string
		set   func(*Config)
	}{
		{"runtime.memory", func(c *Config) { c.Runtime.Memory = "1m" }},
		{"runtime.memory", func(c *Config) { c.Runtime.Memory = "" }},
		{"runtime.cpus", func(c *Config) { c.Runtime.CPUs = 0 }},
		{"runtime.pids", func(c *Config) { c.Runtime.Pids = -1 }},
		{"runtime.node_timeout", func(c *Config) { c.Runtime.NodeTimeout = -time.Second }},
		{"runtime.script", func(c *Config) { c.Runtime.Agent, c.Runtime.Script = "script", "/nonexistent/s.json" }},
		{"pipelines.max_concurrent_runs", func(c *Config) { c.Pipelines.MaxConcurrentRuns = 0 }},
		{"ipc.rescan", func(c *Config) { c.IPC.Rescan = 0 }},
		{"ipc.pipelines_per_hour", func(c *Config) { c.IPC.PipelinesPerHour = -1 }},
		{"workspaces.spares", func(c *Config) { c.Workspaces.Spares = -1 }},
	} {
		c := Defaults()
		tc.set(c)
		found := false
		for _, p := range c.Check() {
			found = found || (p.Field == tc.field && p.Blocking)
		}
		if !found {
			t.Errorf("%s: no blocking problem in %v", tc.field, c.Check())
		}
	}
	for s, want := range map[string]int64{"512m": 512 << 20, "2g": 2 << 30, "2G": 2 << 30, "64k": 64 << 10, "1048576": 1 << 20, "7b": 7} {
		if got, err := ParseSize(s); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"lots", "-1m", "1.5g", "g", "99999999999g"} {
		if _, err := ParseSize(s); err == nil {
			t.Errorf("ParseSize(%q) accepted", s)
		}
	}
}

// A port in use is explained with the setting that chose it and a fix.
func TestListenErrorNamesTheSetting(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	c := Defaults()
	c.HTTP.Listen = busy.Addr().String()
	_, lerr := net.Listen("tcp", c.HTTP.Listen)
	msg := c.ListenError(lerr).Error()
	for _, want := range []string{"cannot serve the dashboard on " + c.HTTP.Listen, "the address is in use", "http.listen", "NANOHOST_HTTP_LISTEN"} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q lacks %q", msg, want)
		}
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
	for _, field := range []string{"http.listen", "slack.bot_token", "slack.app_token", "slack.policy.channels", "slack.policy.starters", "runtime.script", "groups[0].folder", "groups[0].chat", "groups"} {
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

// nanohost config check names exactly the Slack policy setting to add or
// correct, and flags a policy exactly when the Slack channel would refuse
// to start with it (slack.Policy.Validate), naming the same settings.
func TestCheckNamesTheSlackPolicySettingLikeTheSlackChannel(t *testing.T) {
	tests := []struct {
		name   string
		policy SlackPolicy
		fields []string // the settings named, in order
	}{
		{"complete", SlackPolicy{Channels: []string{"C0OPS"}, Starters: []string{"U0ALICE"}}, nil},
		{"approvers only", SlackPolicy{Channels: []string{"G0PRIV"}, Approvers: []string{"group:S0SRE", "*"}}, nil},
		{"nothing", SlackPolicy{}, []string{"slack.policy.channels", "slack.policy.starters"}},
		{"channels but nobody", SlackPolicy{Channels: []string{"C0OPS"}}, []string{"slack.policy.starters"}},
		{"people but no channel", SlackPolicy{Starters: []string{"U0ALICE"}}, []string{"slack.policy.channels"}},
		{"names instead of ids", SlackPolicy{Channels: []string{"#ops", "C1"}, Starters: []string{"alice"}, Approvers: []string{"U0BOB", "group:sre"}},
			[]string{"slack.policy.channels[0]", "slack.policy.channels[1]", "slack.policy.starters[0]", "slack.policy.approvers[1]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Defaults()
			c.Slack = Slack{BotToken: "xoxb-1", AppToken: "xapp-1", Policy: tt.policy}
			var fields []string
			for _, p := range c.Check() {
				if strings.HasPrefix(p.Field, "slack.policy") {
					if !p.Blocking || p.Fix == "" {
						t.Errorf("%+v should block and say how to fix", p)
					}
					fields = append(fields, p.Field)
				}
			}
			if !slices.Equal(fields, tt.fields) {
				t.Errorf("check names %q, want %q", fields, tt.fields)
			}
			err := slack.Policy{Channels: tt.policy.Channels, Starters: tt.policy.Starters, Approvers: tt.policy.Approvers}.Validate()
			if (err != nil) != (len(fields) > 0) {
				t.Fatalf("config check flags %q but the Slack channel says %v", fields, err)
			}
			for _, f := range fields {
				if !strings.Contains(err.Error(), f) {
					t.Errorf("the Slack channel's refusal does not name %s: %v", f, err)
				}
			}
		})
	}
}

// A group whose chat no channel serves would never hear a thing: check says
// so, and how to fix it.
func TestCheckWarnsAboutGroupsNoChannelServes(t *testing.T) {
	c := Defaults()
	c.Groups = []Group{{Folder: "web", Chat: "slack:C0WEB"}, {Folder: "main", Chat: "console:main", Main: true}}
	want := map[string]string{"groups[0].chat": "Slack, which is not configured"}
	check := func() {
		t.Helper()
		got := map[string]string{}
		for _, p := range c.Check() {
			if strings.HasPrefix(p.Field, "groups[") {
				got[p.Field] = p.Message
				if p.Blocking || p.Fix == "" {
					t.Errorf("%+v: want a warning with a fix", p)
				}
			}
		}
		if len(got) != len(want) {
			t.Errorf("group problems %v, want %v", got, want)
		}
		for f, w := range want {
			if !strings.Contains(got[f], w) {
				t.Errorf("%s: %q, want it to say %q", f, got[f], w)
			}
		}
	}
	check()
	c.Slack = Slack{BotToken: "xoxb-1", AppToken: "xapp-1", Policy: SlackPolicy{Channels: []string{"C0OPS"}, Starters: []string{"*"}}}
	want = map[string]string{"groups[0].chat": "C0WEB is not in slack.policy.channels", "groups[1].chat": "on the console, which is off"}
	check()
	c.Slack.Policy.Channels = append(c.Slack.Policy.Channels, "C0WEB")
	c.Console.Enabled = "true"
	want = map[string]string{}
	check()
}

// With Slack on, a configuration without a group there, or without a main
// group, is legal but would leave people talking to nobody: check says so.
func TestCheckWarnsWithoutAGroupOnSlackOrAMainGroup(t *testing.T) {
	c := Defaults()
	c.Slack = Slack{BotToken: "xoxb-1", AppToken: "xapp-1", Policy: SlackPolicy{Channels: []string{"C0OPS"}, Starters: []string{"*"}}}
	messages := func() []string {
		var out []string
		for _, p := range c.Check() {
			if p.Field == "groups" {
				if p.Blocking || p.Fix == "" {
					t.Errorf("%+v: want a warning with a fix", p)
				}
				out = append(out, p.Message)
			}
		}
		return out
	}
	if got := messages(); len(got) != 1 || !strings.Contains(got[0], "no group is on Slack") {
		t.Errorf("no groups at all: %q", got)
	}
	c.Groups = []Group{{Folder: "ops", Chat: "slack:C0OPS"}}
	if got := messages(); len(got) != 1 || !strings.Contains(got[0], "no group is main") {
		t.Errorf("a group but none main: %q", got)
	}
	c.Groups[0].Main = true
	if got := messages(); len(got) != 0 {
		t.Errorf("a main group on Slack: %q", got)
	}
}

// Links in chat point at the dashboard: http.public_url when set (checked
// to be an http(s) URL), else the listen address, a wildcard as loopback.
func TestDashboardURL(t *testing.T) {
	c := Defaults()
	for _, tc := range []struct{ listen, public, want string }{
		{"127.0.0.1:8377", "", "http://127.0.0.1:8377"},
		{"0.0.0.0:9000", "", "http://127.0.0.1:9000"},
		{":9000", "", "http://127.0.0.1:9000"},
		{"[::1]:80", "", "http://[::1]:80"},
		{"127.0.0.1:8377", "https://nano.example.com/", "https://nano.example.com"},
		{"", "", ""},
	} {
		c.HTTP.Listen, c.HTTP.PublicURL = tc.listen, tc.public
		if got := c.DashboardURL(); got != tc.want {
			t.Errorf("listen %q public %q: %q, want %q", tc.listen, tc.public, got, tc.want)
		}
	}
	c.HTTP.Listen, c.HTTP.PublicURL = "127.0.0.1:8377", "javascript:alert(1)"
	var found bool
	for _, p := range c.Check() {
		found = found || (p.Field == "http.public_url" && p.Blocking)
	}
	if !found {
		t.Errorf("a public_url that is not http(s) is not refused: %v", c.Check())
	}
}

// store.url selects PostgreSQL (from the environment too), never prints,
// and config check names what is wrong with it and with the replica
// settings.
func TestStoreAndReplicaSettings(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("NANOHOST_STORE_URL", "postgres://nano:s3cret@db:5432/nanohost")
	t.Setenv("NANOHOST_REPLICA_ID", "replica-b")
	t.Setenv("NANOHOST_LEASE_TTL", "5s")
	c, err := Load("")
	if err != nil {
		t.Fatal(err)
	}
	if !c.SharedStore() || c.StoreURL() != "postgres://nano:s3cret@db:5432/nanohost" {
		t.Errorf("store: shared %v, url %q", c.SharedStore(), c.StoreURL())
	}
	if c.ReplicaID() != "replica-b" || c.Replica.LeaseTTL != 5*time.Second {
		t.Errorf("replica: %q, lease ttl %s", c.ReplicaID(), c.Replica.LeaseTTL)
	}
	if strings.Contains(c.Store.URL.String(), "s3cret") {
		t.Errorf("the store URL prints: %s", c.Store.URL)
	}

	d := Defaults()
	if d.SharedStore() || d.StoreURL() != filepath.Join("data", "nanohost.db") || d.ReplicaID() == "" {
		t.Errorf("defaults: shared %v, url %q, replica %q", d.SharedStore(), d.StoreURL(), d.ReplicaID())
	}
	d.Store.URL = "mysql://db/x"
	d.Replica.ID = "no spaces please"
	d.Replica.LeaseTTL = time.Second
	got := map[string]Problem{}
	for _, p := range d.Check() {
		got[p.Field] = p
	}
	for _, field := range []string{"store.url", "replica.id", "replica.lease_ttl"} {
		if p, ok := got[field]; !ok || !p.Blocking || p.Fix == "" {
			t.Errorf("%s: %+v, want a blocking problem with a fix", field, p)
		}
	}
}

// workspaces.git: false still loads and starts, but check says plainly what
// runs lose without it; pipelines.record_changes, which an older file may
// hold, loads too and check says it does nothing now. Neither blocks.
func TestCheckSaysWhatRunsWithoutGitWorkspacesLose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nanohost.yaml")
	os.WriteFile(path, []byte(`pipelines:
  record_changes: false
workspaces:
  git: false
groups:
  - folder: main
    chat: "console:main"
    main: true
`), 0o600)
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Problem{}
	for _, p := range c.Check() {
		got[p.Field] = p
	}
	for field, want := range map[string][]string{
		"workspaces.git":           {"no isolation", "no record of what they changed", "remove workspaces.git: false"},
		"pipelines.record_changes": {"no longer does anything", "remove pipelines.record_changes"},
	} {
		p, ok := got[field]
		if !ok {
			t.Errorf("no warning for %s: %v", field, c.Check())
			continue
		}
		if p.Blocking {
			t.Errorf("%s blocks the host: %+v", field, p)
		}
		for _, w := range want {
			if !strings.Contains(p.Message+" "+p.Fix, w) {
				t.Errorf("%s: %q does not say %q", field, c.Explain(p), w)
			}
		}
	}
	if d := Defaults(); len(d.checkInPlace()) != 0 {
		t.Errorf("the defaults warn: %v", d.checkInPlace())
	}
}
