// Package config holds nanohost's configuration: nanohost.yaml, environment
// overrides and a .env file for secrets, with embedded defaults so that
// `nanohost serve` with no file at all starts a working host (SQLite in
// ./data, the console channel, the Docker runtime).
package config

import (
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"nanohost/internal/pipeline/mask"
)

// Config is the whole host configuration.
type Config struct {
	// DataDir holds the database, group folders, IPC directories and run logs.
	DataDir string `yaml:"data_dir"`
	// Database is the SQLite file (default <data_dir>/nanohost.db), used
	// unless Store.URL names a PostgreSQL database.
	Database string `yaml:"database"`
	// Store selects PostgreSQL, which several replicas share.
	Store Store `yaml:"store"`
	// Replica names this host among the replicas sharing Store.
	Replica Replica `yaml:"replica"`

	Log       Log       `yaml:"log"`
	HTTP      HTTP      `yaml:"http"`
	Runtime   Runtime   `yaml:"runtime"`
	Slack     Slack     `yaml:"slack"`
	Console   Console   `yaml:"console"`
	IPC       IPC       `yaml:"ipc"`
	Pipelines Pipelines `yaml:"pipelines"`
	// Workspaces gives each run its own git branch and working tree.
	Workspaces Workspaces `yaml:"workspaces"`
	Gateway    Gateway    `yaml:"gateway"`
	Groups     []Group    `yaml:"groups"`
	// Masks are the capabilities pipeline nodes may wear (masks="a,b"):
	// read-only folders and skills through the mount allowlist, context
	// keys and a prompt line, each valid for the node ids/classes it lists
	// (internal/pipeline/mask).
	Masks map[string]mask.Mask `yaml:"masks,omitempty"`
	// Timezone is the zone schedules are read in (an IANA name such as
	// Europe/Berlin); default the host's own (TZ, else /etc/localtime).
	Timezone string `yaml:"timezone,omitempty"`
	// Schedules are operator-owned scheduled tasks (docs/schedules.md):
	// stored at start-up, replacing the ones an earlier start stored.
	Schedules []Schedule `yaml:"schedules,omitempty"`
	// Webhooks start a pipeline or a prompt when POST /hooks/<name> is
	// called with a good signature (docs/schedules.md).
	Webhooks []Webhook `yaml:"webhooks,omitempty"`

	// AgentSecrets names environment variables passed to agents (only into
	// the agent process, never into the container's config).
	AgentSecrets []string `yaml:"agent_secrets"`

	// Secrets loaded from the environment / .env for AgentSecrets. Never serialised.
	secretValues map[string]Secret
	// Source is the file the config was read from ("" = embedded defaults).
	Source string `yaml:"-"`
	// readProblems are what reading Source found (misspelt keys, values of
	// the wrong type); lines where each setting is written in it; fromEnv
	// the settings an environment variable overrode (by that variable).
	readProblems []Problem
	lines        positions
	fromEnv      map[string]string
}

// Store selects the database. Empty: SQLite at Database (one host).
type Store struct {
	// URL is a postgres:// (or postgresql://) URL: several `nanohost serve`
	// replicas share runs through it (docs/scaling.md). It may carry a
	// password, so it never prints.
	URL Secret `yaml:"url"`
}

// Replica configures this host as one of several sharing a PostgreSQL
// store.
type Replica struct {
	// ID names the replica in leases, /healthz and `runs list` (default:
	// the machine's host name). Each replica needs its own; a second
	// process with the id of a live replica refuses to start.
	ID string `yaml:"id"`
	// LeaseTTL is how long a replica's claim on a run lasts without being
	// renewed: a replica that dies has its runs taken over within about
	// this long (renewed every LeaseTTL/3).
	LeaseTTL time.Duration `yaml:"lease_ttl"`
}

// Log configures structured logging.
type Log struct {
	Level  string `yaml:"level"`  // debug, info, warn, error
	Format string `yaml:"format"` // text or json
}

// HTTP configures the operations endpoint (/healthz, /metrics, dashboard).
type HTTP struct {
	// Listen is the address; loopback by default. A non-loopback address requires Token.
	Listen string `yaml:"listen"`
	Token  Secret `yaml:"token"`
	// PublicURL is the dashboard's address as people reach it (behind a
	// proxy, on another host name), for links in chat; default
	// http://<listen>.
	PublicURL string `yaml:"public_url"`
}

// Runtime configures agent containers.
type Runtime struct {
	Kind  string `yaml:"kind"`  // docker or kubernetes
	Image string `yaml:"image"` // the agent image
	// Agent selects the runner inside the image: claude, command or script.
	Agent string `yaml:"agent"`
	// AgentCommand is the command template for Agent=command.
	AgentCommand string `yaml:"agent_command"`
	// Agents maps an llm_provider (a pipeline's stylesheet names it) to the
	// agent that serves its nodes: "claude", or any command line (`codex
	// exec`, `gemini`, a script) run as a command agent, which gets the
	// node's llm_model and reasoning_effort in its own flags when nanoagent
	// knows the tool. Nodes naming no provider get Agent. A pipeline naming
	// a provider missing here is refused by lint (provider_known).
	Agents map[string]string `yaml:"agents"`
	// Script is the S.json file for Agent=script (demos and tests).
	Script        string  `yaml:"script"`
	MaxContainers int     `yaml:"max_containers"`
	Memory        string  `yaml:"memory"` // e.g. 2g
	CPUs          float64 `yaml:"cpus"`
	Pids          int64   `yaml:"pids"`
	// Network is none (default: the container reaches nothing; its model
	// through the gateway's socket) or bridge (needs UnrestrictedEgress).
	Network string `yaml:"network"`
	// UnrestrictedEgress must be true for network: bridge: agents can then
	// connect anywhere the host can.
	UnrestrictedEgress bool `yaml:"unrestricted_egress"`
	// Egress names the hosts agents may reach through the host's egress
	// proxy (HTTP and HTTPS, ports 80 and 443), e.g. a package registry.
	Egress      Egress        `yaml:"egress"`
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	NodeTimeout time.Duration `yaml:"node_timeout"` // default per node when it sets none
	// MountAllowlist is a JSON file, outside every mounted directory, listing extra mounts agents may get.
	MountAllowlist string `yaml:"mount_allowlist"`
	// Kubernetes configures kind: kubernetes.
	Kubernetes Kubernetes `yaml:"kubernetes"`
}

// Slack configures the Slack channel. Empty tokens = Slack disabled.
type Slack struct {
	BotToken Secret      `yaml:"bot_token"`
	AppToken Secret      `yaml:"app_token"`
	APIURL   string      `yaml:"api_url"` // tests point this at the fake server
	Policy   SlackPolicy `yaml:"policy"`
}

// Enabled reports whether Slack is configured.
func (s Slack) Enabled() bool { return s.BotToken != "" || s.AppToken != "" }

// SlackPolicy says who may do what. Deny by default.
type SlackPolicy struct {
	// Channels where runs may start and post (Slack channel ids).
	Channels []string `yaml:"channels"`
	// Starters may start, cancel and resume runs: user ids (U…) and user groups (group:S…).
	Starters []string `yaml:"starters"`
	// Approvers may answer gates (a gate's own `approvers` attribute narrows this).
	Approvers []string `yaml:"approvers"`
	// PreventSelfApproval stops the user who started a run from answering its gates.
	PreventSelfApproval bool `yaml:"prevent_self_approval"`
}

// Console configures the terminal chat used when Slack is not configured.
type Console struct {
	// Enabled: "auto" (when Slack is off), "true" or "false".
	Enabled string `yaml:"enabled"`
}

// IPC configures the agents' request directories.
type IPC struct {
	Rescan            time.Duration `yaml:"rescan"`
	PipelinesPerHour  int           `yaml:"pipelines_per_hour"`
	MessagesPerMinute int           `yaml:"messages_per_minute"`
	MaxRequestBytes   int64         `yaml:"max_request_bytes"`
}

// Pipelines configures runs.
type Pipelines struct {
	DefaultVerbosity  string `yaml:"default_verbosity"` // minimal, standard, verbose
	MaxConcurrentRuns int    `yaml:"max_concurrent_runs"`
	// Dirs holds bundled workflows (`/pipeline run <name>` looks here after the group workspace).
	Dirs []string `yaml:"dirs"`
	// RecordChanges is read so that older files still load; it does
	// nothing (config check says so): a run's changes are the commits of its
	// branch (workspaces.git), and with git workspaces off nothing is
	// recorded.
	RecordChanges bool `yaml:"record_changes"`
	// Strict refuses to start a pipeline with lint warnings (a misspelt
	// attribute, a condition key nothing sets), as `pipeline validate
	// --strict` does — in every group; a group's own strict does it there.
	Strict bool `yaml:"strict"`
}

// Workspaces configures each run's git branch and working tree
// (docs/workspaces.md).
type Workspaces struct {
	// Git gives every run a branch nanohost/<run> in a repository the host
	// keeps per group, and a working tree of its own, with a commit per
	// stage (default on). Off, runs work in the group's folder itself, with
	// no isolation and no record of what they changed (config check warns).
	Git         bool   `yaml:"git"`
	AuthorName  string `yaml:"author_name"`
	AuthorEmail string `yaml:"author_email"`
	// MaxFileBytes and MaxStageBytes bound a recorded file and what one
	// stage may add (0: 100 MiB and 1 GiB).
	MaxFileBytes  int64 `yaml:"max_file_bytes"`
	MaxStageBytes int64 `yaml:"max_stage_bytes"`
	// MaxTreeBytes bounds a run's working tree, all its files after a
	// stage (0: 10 GiB): a stage that leaves it larger fails, naming it.
	MaxTreeBytes int64 `yaml:"max_tree_bytes,omitempty"`
	// Retention is how long a finished run's working tree is kept (its
	// branch stays until `nanohost runs prune`); default 24h.
	Retention time.Duration `yaml:"retention"`
	// Spares is how many spare working trees the host keeps checked out
	// per repository for the next run to start in (default 1; 0: none).
	// A run's tree is then a rename and the few files that changed, not
	// thousands of new files; each spare costs one tree's disk per group
	// that runs pipelines (docs/workspaces.md, "Spare trees").
	Spares int `yaml:"spares"`
	// Dir holds the groups' repositories and the runs' workspace state
	// (default <data_dir>/state/workspaces). Replicas sharing a store set
	// it to a directory they all share (a shared volume), so that the
	// replica that takes a run over continues its branch.
	Dir string `yaml:"dir,omitempty"`
}

// Group is a registered chat with its own folder, agent and memory.
type Group struct {
	Folder  string `yaml:"folder"`  // data/groups/<folder>
	Name    string `yaml:"name"`    // display name
	Chat    string `yaml:"chat"`    // e.g. slack:C0123ABC or console:main
	Trigger string `yaml:"trigger"` // "@mention" (default) or a word such as "nano"
	Main    bool   `yaml:"main"`    // the main group may target any registered chat
	// Strict refuses pipelines with lint warnings in this group (see
	// Pipelines.Strict).
	Strict bool `yaml:"strict,omitempty"`
	// Mounts are extra host directories for the group's containers, each
	// "HOST[:NAME][:ro|rw]" (read-only unless rw), seen at
	// /workspace/extra/NAME. Every one must pass the mount allowlist.
	Mounts []string `yaml:"mounts,omitempty"`

	// Repo is the repository the group's runs start from (with git
	// workspaces): a local path or a remote URL. The host fetches Base
	// from it into its own repository when a run starts; empty, a run
	// starts from a snapshot of the group's folder (docs/workspaces.md).
	Repo string `yaml:"repo,omitempty"`
	// Base is Repo's branch runs start from (default: its default branch).
	Base string `yaml:"base,omitempty"`
	// RepoToken authenticates pushes to an https Repo and the pull request
	// API: write it as ${ENV_VAR}. It goes only into the git command's
	// environment and the API's Authorization header.
	RepoToken Secret `yaml:"repo_token,omitempty"`
	// Push pushes a succeeded run's branch nanohost/<run> to Repo.
	Push bool `yaml:"push,omitempty"`
	// PullRequest opens a pull request on GitHub for a pushed branch.
	PullRequest *PullRequest `yaml:"pull_request,omitempty"`
	// Merge "fast-forward" (groups without Repo) makes a succeeded run's
	// result the group's folder when the folder has not changed since the
	// run started; otherwise it is reported and the branch kept.
	Merge string `yaml:"merge,omitempty"`
}

// PullRequest configures the pull requests a group's runs open.
type PullRequest struct {
	// APIURL is GitHub's REST API (default https://api.github.com/; for
	// GitHub Enterprise https://HOST/api/v3/).
	APIURL string `yaml:"api_url,omitempty"`
	// Repository is owner/name on GitHub (default: read from Repo's URL).
	Repository string `yaml:"repository,omitempty"`
	Draft      bool   `yaml:"draft,omitempty"`
}

// PullRequestRepository is the owner/name pull requests are opened on:
// PullRequest.Repository, else the last two parts of Repo's URL path.
func (g Group) PullRequestRepository() (owner, name string, ok bool) {
	full := ""
	if g.PullRequest != nil {
		full = g.PullRequest.Repository
	}
	if full == "" {
		p := g.Repo
		if u, err := url.Parse(p); err == nil && u.Scheme != "" {
			p = u.Path
		} else if _, after, found := strings.Cut(p, ":"); found && !strings.HasPrefix(p, "/") {
			p = after // git@github.com:owner/name.git
		}
		parts := strings.Split(strings.Trim(strings.TrimSuffix(strings.TrimSuffix(p, "/"), ".git"), "/"), "/")
		if len(parts) >= 2 {
			full = parts[len(parts)-2] + "/" + parts[len(parts)-1]
		}
	}
	owner, name, ok = strings.Cut(full, "/")
	return owner, name, ok && owner != "" && name != "" && !strings.Contains(name, "/")
}

// Schedule is an operator-owned scheduled task.
type Schedule struct {
	// Name identifies it (its task id is config-<name>).
	Name string `yaml:"name"`
	// Group runs it: its workspace, and its chat unless Chat is set.
	Group string `yaml:"group"`
	Chat  string `yaml:"chat,omitempty"`
	// When is cron ("0 9 * * 1-5"), "every 30m", or "at 2026-12-01 09:00".
	When string `yaml:"when"`
	// Pipeline (a stored pipeline's name) with Inputs, or Prompt for the
	// group's agent in ContextMode (group | isolated, default isolated).
	Pipeline    string            `yaml:"pipeline,omitempty"`
	Inputs      map[string]string `yaml:"inputs,omitempty"`
	Prompt      string            `yaml:"prompt,omitempty"`
	ContextMode string            `yaml:"context_mode,omitempty"`
	// CatchUp is once (default: a fire missed while down runs once at
	// start-up) or skip.
	CatchUp string `yaml:"catch_up,omitempty"`
}

// Webhook is POST /hooks/<name>: a signed request starts Pipeline (or
// sends Prompt to the group's agent) in Chat.
type Webhook struct {
	Name string `yaml:"name"`
	// Secret signs deliveries (HMAC-SHA256): write it as ${ENV_VAR}.
	Secret   Secret `yaml:"secret"`
	Pipeline string `yaml:"pipeline,omitempty"`
	Prompt   string `yaml:"prompt,omitempty"`
	// Group runs it (default the group of Chat, else the main group);
	// Chat is where it reports (default the group's chat).
	Group string `yaml:"group,omitempty"`
	Chat  string `yaml:"chat,omitempty"`
	// Inputs map run inputs to payload paths: {repo: repository.full_name}.
	Inputs map[string]string `yaml:"inputs,omitempty"`
	// When filters deliveries: each payload path must equal its value.
	When map[string]string `yaml:"when,omitempty"`
	// PerMinute bounds the deliveries taken per minute (default 30).
	PerMinute int `yaml:"per_minute,omitempty"`
	// MaxBytes caps a delivery's body (default 1 MiB).
	MaxBytes int64 `yaml:"max_bytes,omitempty"`
}

// Location is the zone schedules are read in: Timezone, else the host's.
func (c *Config) Location() (*time.Location, error) {
	if c.Timezone == "" {
		return time.Local, nil
	}
	loc, err := time.LoadLocation(c.Timezone)
	if err != nil {
		return nil, fmt.Errorf("timezone %q is not a time zone name (e.g. Europe/Berlin, UTC): %v", c.Timezone, err)
	}
	return loc, nil
}

// Defaults returns the embedded defaults.
func Defaults() *Config {
	return &Config{
		DataDir: "data",
		Log:     Log{Level: "info", Format: "text"},
		HTTP:    HTTP{Listen: "127.0.0.1:8377"},
		Runtime: Runtime{
			Kind: "docker", Image: "nanohost-agent:latest", Agent: "claude",
			MaxContainers: 5, Memory: "2g", CPUs: 1, Pids: 512, Network: "none",
			IdleTimeout: 10 * time.Minute,
		},
		Replica:      Replica{LeaseTTL: 8 * time.Second},
		Console:      Console{Enabled: "auto"},
		IPC:          IPC{Rescan: 2 * time.Second, PipelinesPerHour: 30, MessagesPerMinute: 30, MaxRequestBytes: 2 << 20},
		Pipelines:    Pipelines{DefaultVerbosity: "standard", MaxConcurrentRuns: 20, RecordChanges: true},
		Workspaces:   Workspaces{Git: true, Retention: 24 * time.Hour, Spares: 1},
		Gateway:      Gateway{Enabled: true},
		AgentSecrets: []string{"ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"},
	}
}

// DatabasePath is Database, defaulting to <data_dir>/nanohost.db.
func (c *Config) DatabasePath() string {
	if c.Database != "" {
		return c.Database
	}
	return filepath.Join(c.DataDir, "nanohost.db")
}

// StoreURL is what the store opens: Store.URL (PostgreSQL) when set, else
// the SQLite file DatabasePath.
func (c *Config) StoreURL() string {
	if u := c.Store.URL.Reveal(); u != "" {
		return u
	}
	return c.DatabasePath()
}

// SharedStore reports whether the store is PostgreSQL, shared by replicas.
func (c *Config) SharedStore() bool { return c.Store.URL != "" }

// ReplicaID is Replica.ID, defaulting to the machine's host name.
func (c *Config) ReplicaID() string {
	if c.Replica.ID != "" {
		return c.Replica.ID
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "nanohost"
}

// DashboardURL is where people reach the dashboard: http.public_url, else
// http://<http.listen> (a wildcard address as 127.0.0.1); "" when the HTTP
// endpoint is off.
func (c *Config) DashboardURL() string {
	if c.HTTP.PublicURL != "" {
		return strings.TrimRight(c.HTTP.PublicURL, "/")
	}
	if c.HTTP.Listen == "" {
		return ""
	}
	host, port, err := net.SplitHostPort(c.HTTP.Listen)
	if err != nil {
		return ""
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// ConsoleEnabled reports whether the console channel should run.
func (c *Config) ConsoleEnabled() bool {
	switch c.Console.Enabled {
	case "true":
		return true
	case "false":
		return false
	}
	return !c.Slack.Enabled()
}

// AgentSecretValues returns the secrets for agents, by variable name.
func (c *Config) AgentSecretValues() map[string]Secret { return c.secretValues }

// MainGroup returns the main group, if one is registered.
func (c *Config) MainGroup() (Group, bool) {
	for _, g := range c.Groups {
		if g.Main {
			return g, true
		}
	}
	return Group{}, false
}

// Secret is a string that never prints: logs, `config show` and JSON see "********".
type Secret string

func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "********"
}

// LogValue keeps secrets out of slog output.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalYAML redacts the secret.
func (s Secret) MarshalYAML() (any, error) { return s.String(), nil }

// MarshalJSON redacts the secret.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + s.String() + `"`), nil }

// Reveal returns the secret's value, for the one place that must use it.
func (s Secret) Reveal() string { return string(s) }

// AgentFor is the agent a runtime.agents value names: kind claude, or a
// command agent running the value.
func AgentFor(value string) (kind, command string) {
	if v := strings.TrimSpace(value); v == "claude" {
		return "claude", ""
	}
	return "command", strings.TrimSpace(value)
}

// Providers are the llm_provider values a pipeline may name: those
// runtime.agents maps (lower case), or, when it maps none and the one agent
// is Claude Code, anthropic; nil when any provider goes to the one agent
// (a command agent reads NANOAGENT_PROVIDER itself).
func (r Runtime) Providers() []string {
	if len(r.Agents) == 0 {
		if r.Agent == "claude" || r.Agent == "" {
			return []string{"anthropic"}
		}
		return nil
	}
	out := make([]string, 0, len(r.Agents))
	for p := range r.Agents {
		out = append(out, strings.ToLower(strings.TrimSpace(p)))
	}
	slices.Sort(out)
	return out
}

// HookProviders are the providers whose agent runs tool_hooks (Claude
// Code, through its PreToolUse/PostToolUse hooks), "" standing for nodes
// that name no provider (the default agent, runtime.agent).
func (r Runtime) HookProviders() []string {
	var out []string
	if r.Agent == "claude" || r.Agent == "" {
		out = append(out, "")
		if len(r.Agents) == 0 {
			out = append(out, "anthropic")
		}
	}
	for p, v := range r.Agents {
		if kind, _ := AgentFor(v); kind == "claude" {
			out = append(out, strings.ToLower(strings.TrimSpace(p)))
		}
	}
	slices.Sort(out)
	return out
}
