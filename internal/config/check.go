package config

import (
	"fmt"
	"maps"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Problem is one thing wrong with a configuration, with how to fix it.
// Where it was given (a line of the file, an environment variable) is the
// configuration's to say: Config.Locate.
type Problem struct {
	Field    string `json:"field"`
	Message  string `json:"message"`
	Fix      string `json:"fix"`
	Blocking bool   `json:"blocking"` // the host refuses to start
}

func (p Problem) String() string {
	return fmt.Sprintf("%s: %s: %s (fix: %s)", p.Level(), p.Field, p.Message, p.Fix)
}

// Level is "error" for a blocking problem, else "warning".
func (p Problem) Level() string {
	if p.Blocking {
		return "error"
	}
	return "warning"
}

var folderName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// Check explains every problem with the configuration: what reading the
// file found (misspelt keys, values of the wrong type), then the checks
// serve makes before it starts.
func (c *Config) Check() []Problem {
	ps := append([]Problem(nil), c.readProblems...)
	return append(ps, c.check()...)
}

// Locate says where p's setting was given: the environment variable that
// overrode it, else its line in the file; neither for a setting left at
// its default.
func (c *Config) Locate(p Problem) (line int, env string) {
	if env := c.fromEnv[p.Field]; env != "" {
		return 0, env
	}
	return c.lines[p.Field], ""
}

// Explain is p as a line for people, with where its setting was given:
// "error: runtime.memory (line 12): … (fix: …)".
func (c *Config) Explain(p Problem) string {
	where := ""
	switch line, env := c.Locate(p); {
	case env != "":
		where = " (" + env + ")"
	case line > 0:
		where = fmt.Sprintf(" (line %d)", line)
	}
	return fmt.Sprintf("%s: %s%s: %s (fix: %s)", p.Level(), p.Field, where, p.Message, p.Fix)
}

func (c *Config) check() []Problem {
	var ps []Problem
	add := func(blocking bool, field, msg, fix string) {
		ps = append(ps, Problem{Field: field, Message: msg, Fix: fix, Blocking: blocking})
	}
	if c.DataDir == "" {
		add(true, "data_dir", "is empty", "set data_dir (default ./data)")
	}
	if !oneOf(c.Log.Level, "debug", "info", "warn", "error") {
		add(true, "log.level", fmt.Sprintf("%q is not a level", c.Log.Level), "use debug, info, warn or error")
	}
	if !oneOf(c.Log.Format, "text", "json") {
		add(true, "log.format", fmt.Sprintf("%q is not a format", c.Log.Format), "use text or json")
	}
	ps = append(ps, c.checkStore()...)
	ps = append(ps, c.checkHTTP()...)
	ps = append(ps, c.checkRuntime()...)
	ps = append(ps, c.checkEgress()...)
	ps = append(ps, c.checkGateway()...)
	ps = append(ps, c.checkLimits()...)
	ps = append(ps, c.checkKubernetes()...)
	ps = append(ps, c.checkSlack()...)
	ps = append(ps, c.checkGroups()...)
	ps = append(ps, c.checkWorkspacesDir()...)
	ps = append(ps, c.checkInPlace()...)
	ps = append(ps, c.checkSchedules()...)
	_, maskProblems := c.MaskMounts()
	ps = append(ps, maskProblems...)
	if !oneOf(c.Pipelines.DefaultVerbosity, "minimal", "standard", "verbose") {
		add(true, "pipelines.default_verbosity", fmt.Sprintf("%q is not a verbosity", c.Pipelines.DefaultVerbosity), "use minimal, standard or verbose")
	}
	return ps
}

var replicaName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

func (c *Config) checkStore() []Problem {
	var ps []Problem
	if u := c.Store.URL.Reveal(); u != "" {
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "postgres" && p.Scheme != "postgresql") || p.Host == "" {
			ps = append(ps, Problem{"store.url", "is not a postgres:// URL",
				"use postgres://USER:PASSWORD@HOST:5432/DATABASE (or unset it for SQLite at database)", true})
		}
	}
	if id := c.ReplicaID(); !replicaName.MatchString(id) {
		ps = append(ps, Problem{"replica.id", fmt.Sprintf("%q is not a replica name", id),
			"use up to 63 letters, digits, '.', '-' or '_' (or NANOHOST_REPLICA_ID)", true})
	}
	if c.Replica.LeaseTTL < 2*time.Second || c.Replica.LeaseTTL > 10*time.Minute {
		ps = append(ps, Problem{"replica.lease_ttl", fmt.Sprintf("%s is out of range", c.Replica.LeaseTTL),
			"use 2s to 10m; 8s (the default) resumes a dead replica's runs within ~10s", true})
	}
	return ps
}

func (c *Config) checkHTTP() []Problem {
	if u := c.HTTP.PublicURL; u != "" {
		if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return []Problem{{"http.public_url", fmt.Sprintf("%q is not an http(s) URL", u), "use e.g. https://nanohost.example.com", true}}
		}
	}
	if c.HTTP.Listen == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(c.HTTP.Listen)
	if err != nil {
		return []Problem{{"http.listen", fmt.Sprintf("%q is not host:port", c.HTTP.Listen), "use e.g. 127.0.0.1:8377", true}}
	}
	if !isLoopback(host) && c.HTTP.Token == "" {
		return []Problem{{"http.listen", fmt.Sprintf("%s is not a loopback address and no token is set", c.HTTP.Listen),
			"bind to 127.0.0.1, or set http.token (or NANOHOST_HTTP_TOKEN)", true}}
	}
	return nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (c *Config) checkRuntime() []Problem {
	var ps []Problem
	r := c.Runtime
	if !oneOf(r.Kind, RuntimeDocker, RuntimeKubernetes) {
		ps = append(ps, Problem{"runtime.kind", fmt.Sprintf("%q is not supported", r.Kind), "use docker, or kubernetes (runtime.kubernetes, docs/kubernetes.md)", true})
	}
	if !oneOf(r.Agent, "claude", "command", "script") {
		ps = append(ps, Problem{"runtime.agent", fmt.Sprintf("%q is not an agent", r.Agent), "use claude, command or script", true})
	}
	if r.Agent == "command" && r.AgentCommand == "" {
		ps = append(ps, Problem{"runtime.agent_command", "is empty but runtime.agent is command", "set the agent CLI to run, e.g. \"aider --message-file -\"", true})
	}
	for _, p := range slices.Sorted(maps.Keys(r.Agents)) {
		if strings.TrimSpace(p) == "" || strings.TrimSpace(r.Agents[p]) == "" {
			ps = append(ps, Problem{"runtime.agents", fmt.Sprintf("maps provider %q to %q", p, r.Agents[p]),
				"map each provider to claude or to a command line, e.g. openai: \"codex exec\"", true})
		}
	}
	if r.Agent == "script" && r.Script == "" {
		ps = append(ps, Problem{"runtime.script", "is empty but runtime.agent is script", "point it at an S.json script file", true})
	}
	if r.Agent == "claude" && len(c.secretValues) == 0 {
		ps = append(ps, Problem{"agent_secrets", "no ANTHROPIC_API_KEY (or CLAUDE_CODE_OAUTH_TOKEN) in the environment or .env",
			"put ANTHROPIC_API_KEY=... in .env, or use runtime.agent: script for a demo", false})
	}
	if r.MaxContainers < 1 {
		ps = append(ps, Problem{"runtime.max_containers", "must be at least 1", "set it to 5 (the default)", true})
	}
	if !oneOf(r.Network, "bridge", "none") {
		ps = append(ps, Problem{"runtime.network", fmt.Sprintf("%q is not supported", r.Network), "use bridge or none", true})
	}
	if r.MountAllowlist != "" {
		abs, _ := filepath.Abs(r.MountAllowlist)
		data, _ := filepath.Abs(c.DataDir)
		if strings.HasPrefix(abs, data+string(filepath.Separator)) {
			ps = append(ps, Problem{"runtime.mount_allowlist", "lies inside data_dir, where agents' folders are mounted",
				"keep it outside every mounted directory, e.g. ~/.config/nanohost/mount-allowlist.json", true})
		}
	}
	return ps
}

func (c *Config) checkSlack() []Problem {
	s := c.Slack
	if !s.Enabled() {
		return nil
	}
	var ps []Problem
	if !strings.HasPrefix(s.BotToken.Reveal(), "xoxb-") {
		ps = append(ps, Problem{"slack.bot_token", "missing or not a bot token (xoxb-…)", "set SLACK_BOT_TOKEN in .env (OAuth & Permissions → Bot User OAuth Token)", true})
	}
	if !strings.HasPrefix(s.AppToken.Reveal(), "xapp-") {
		ps = append(ps, Problem{"slack.app_token", "missing or not an app-level token (xapp-…)", "set SLACK_APP_TOKEN in .env (Basic Information → App-Level Tokens, scope connections:write)", true})
	}
	return append(ps, s.Policy.problems()...)
}

// Slack ids, as the Slack channel checks them (slack.Policy.Validate).
var (
	slackChannelID = regexp.MustCompile(`^[CGD][A-Z0-9]{2,}$`)
	slackUserID    = regexp.MustCompile(`^[UW][A-Z0-9]{2,}$`)
	slackGroupID   = regexp.MustCompile(`^S[A-Z0-9]{2,}$`)
)

// problems names each policy setting the Slack channel would refuse to
// start with, in its words (a test keeps the two in step): which setting
// is missing, or which entry is not a Slack id.
func (p SlackPolicy) problems() []Problem {
	var ps []Problem
	add := func(field, msg, fix string) { ps = append(ps, Problem{field, msg, fix, true}) }
	if len(p.Channels) == 0 {
		add("slack.policy.channels", "is empty: Slack refuses every run and gate (deny by default)",
			`set slack.policy.channels to the Slack channel ids where runs may start and post (e.g. ["C0123ABCD"]; the id is at the bottom of the channel's About tab)`)
	}
	for i, c := range p.Channels {
		if !slackChannelID.MatchString(c) {
			add(fmt.Sprintf("slack.policy.channels[%d]", i), fmt.Sprintf("%q is not a channel id (want C…, G… or D…, not a #name)", c),
				"use the id at the bottom of the channel's About tab, e.g. C0123ABCD")
		}
	}
	if len(p.Starters) == 0 && len(p.Approvers) == 0 {
		add("slack.policy.starters", "is empty, and so is slack.policy.approvers: nobody may start a run or answer a gate",
			`set slack.policy.starters (who may start runs) and/or slack.policy.approvers (who may answer gates): user ids "U…", user groups "group:S…", or "*" for everyone in those channels`)
	}
	for _, list := range []struct {
		setting string
		ids     []string
	}{{"slack.policy.starters", p.Starters}, {"slack.policy.approvers", p.Approvers}} {
		for i, id := range list.ids {
			if !validPrincipal(id) {
				add(fmt.Sprintf("%s[%d]", list.setting, i), fmt.Sprintf("%q is not a user id (U…/W…), group:S… or *", id),
					"use the member id from the person's Slack profile (⋮ → Copy member ID), group:S… for a user group, or *")
			}
		}
	}
	return ps
}

func validPrincipal(id string) bool {
	if id == "*" || slackUserID.MatchString(id) {
		return true
	}
	g, ok := strings.CutPrefix(id, "group:")
	return ok && slackGroupID.MatchString(g)
}

func (c *Config) checkGroups() []Problem {
	var ps []Problem
	seen := map[string]bool{}
	mains := 0
	for i, g := range c.Groups {
		field := fmt.Sprintf("groups[%d]", i)
		if !folderName.MatchString(g.Folder) {
			ps = append(ps, Problem{field + ".folder", fmt.Sprintf("%q is not a safe folder name", g.Folder), "use lowercase letters, digits, - and _ (e.g. team-web)", true})
		}
		if seen[g.Folder] {
			ps = append(ps, Problem{field + ".folder", fmt.Sprintf("%q is registered twice", g.Folder), "give every group its own folder", true})
		}
		seen[g.Folder] = true
		if !strings.Contains(g.Chat, ":") {
			ps = append(ps, Problem{field + ".chat", fmt.Sprintf("%q does not name a channel", g.Chat), "use slack:<channel id> or console:<name>", true})
		}
		ps = append(ps, c.checkGroupChat(field+".chat", g.Chat)...)
		ps = append(ps, c.checkGroupRepo(field, g)...)
		if g.Main {
			mains++
		}
	}
	if mains > 1 {
		ps = append(ps, Problem{"groups", fmt.Sprintf("%d groups are marked main", mains), "mark exactly one group main: true", true})
	}
	_, mountProblems := c.GroupMounts()
	ps = append(ps, mountProblems...)
	return append(ps, c.checkGroupCoverage(mains)...)
}

// checkGroupCoverage warns when Slack has no group to talk to, or when no
// group is main (the console makes its own main group when it runs and has
// none).
func (c *Config) checkGroupCoverage(mains int) []Problem {
	var ps []Problem
	onSlack := slices.ContainsFunc(c.Groups, func(g Group) bool { return strings.HasPrefix(g.Chat, "slack:") })
	if c.Slack.Enabled() && !onSlack {
		ps = append(ps, Problem{"groups", "no group is on Slack: nanohost answers nothing there (every channel is \"not registered\")",
			`add one, e.g. groups: [{folder: main, chat: "slack:C0123ABCD", main: true}]`, false})
	}
	if mains == 0 && len(c.Groups) > 0 && !c.ConsoleEnabled() {
		ps = append(ps, Problem{"groups", "no group is main: no chat may /register groups, and no agent may act on another group's chat",
			"mark the group of your admin channel main: true", false})
	}
	return ps
}

// checkGroupChat warns about a group whose chat no channel serves, or
// where Slack's policy lets no run start: it would never hear a thing.
func (c *Config) checkGroupChat(field, chat string) []Problem {
	channel, id, _ := strings.Cut(chat, ":")
	switch {
	case channel == "slack" && !c.Slack.Enabled():
		return []Problem{{field, fmt.Sprintf("%q is on Slack, which is not configured: the group hears nothing", chat),
			"set SLACK_BOT_TOKEN and SLACK_APP_TOKEN in .env, or move the group to console:<name>", false}}
	case channel == "slack" && !slices.Contains(c.Slack.Policy.Channels, id):
		return []Problem{{field, fmt.Sprintf("%s is not in slack.policy.channels: Slack ignores every message there and posts nothing, so the group hears nothing", id),
			fmt.Sprintf("add %s to slack.policy.channels", id), false}}
	case channel == "console" && !c.ConsoleEnabled():
		return []Problem{{field, fmt.Sprintf("%q is on the console, which is off (it runs only when Slack is not configured, unless console.enabled is true)", chat),
			"move the group to slack:<channel id>, or set console.enabled: true", false}}
	}
	return nil
}

func oneOf(v string, options ...string) bool {
	for _, o := range options {
		if v == o {
			return true
		}
	}
	return false
}

// Blocking reports whether any problem stops the host from starting.
func Blocking(ps []Problem) bool {
	for _, p := range ps {
		if p.Blocking {
			return true
		}
	}
	return false
}

// checkGroupRepo checks a group's repository and what its runs deliver
// (docs/workspaces.md).
func (c *Config) checkGroupRepo(field string, g Group) []Problem {
	var ps []Problem
	uses := g.Repo != "" || g.Push || g.PullRequest != nil || g.Merge != ""
	if uses && !c.Workspaces.Git {
		ps = append(ps, Problem{field, "repo, push, pull_request and merge need git workspaces, which are off", "set workspaces.git: true", true})
	}
	if g.Repo != "" && !strings.Contains(g.Repo, "://") && !filepath.IsAbs(g.Repo) && !strings.Contains(g.Repo, "@") {
		ps = append(ps, Problem{field + ".repo", fmt.Sprintf("%q is neither an absolute path nor a URL", g.Repo), "write /srv/git/app.git or https://github.com/owner/app.git", true})
	}
	if g.Repo != "" && filepath.IsAbs(g.Repo) {
		groups := filepath.Join(c.DataDir, "groups")
		if abs, err := filepath.Abs(groups); err == nil && (g.Repo == abs || strings.HasPrefix(g.Repo, abs+string(filepath.Separator))) {
			ps = append(ps, Problem{field + ".repo", fmt.Sprintf("%s is inside the groups' folders, which agents write", g.Repo), "keep the repository outside every folder mounted into a container", true})
		}
	}
	if g.Base != "" && g.Repo == "" {
		ps = append(ps, Problem{field + ".base", "base is set but repo is not", "set repo, or remove base", true})
	}
	if (g.Push || g.PullRequest != nil) && g.Repo == "" {
		ps = append(ps, Problem{field + ".push", "push and pull_request need the group's repo", "set repo: to the repository to push to", true})
	}
	if g.PullRequest != nil {
		if !g.Push {
			ps = append(ps, Problem{field + ".pull_request", "a pull request needs the branch pushed", "set push: true", true})
		}
		if _, _, ok := g.PullRequestRepository(); !ok {
			ps = append(ps, Problem{field + ".pull_request.repository", "no owner/name to open pull requests on", "set pull_request.repository: owner/name", true})
		}
		if g.RepoToken == "" {
			ps = append(ps, Problem{field + ".repo_token", "pull_request needs a token", "set repo_token: ${GITHUB_TOKEN} and GITHUB_TOKEN in .env", true})
		}
	}
	switch {
	case g.Merge == "":
	case g.Merge != "fast-forward":
		ps = append(ps, Problem{field + ".merge", fmt.Sprintf("%q is not a merge mode", g.Merge), "use merge: fast-forward, or leave it out", true})
	case g.Repo != "":
		ps = append(ps, Problem{field + ".merge", "merge: fast-forward is for groups without a repo (their folder)", "use push: true (and pull_request) for a repo", true})
	}
	return ps
}

// checkWorkspacesDir refuses a workspaces.dir agents could write: the
// host's repositories must be outside every mounted folder.
// checkInPlace says plainly what runs without git workspaces lose, and
// that pipelines.record_changes no longer does anything
// (docs/workspaces.md, "Without git workspaces").
func (c *Config) checkInPlace() []Problem {
	var ps []Problem
	if !c.Workspaces.Git {
		ps = append(ps, Problem{"workspaces.git", "is false: runs work in the groups' folders themselves, with no isolation " +
			"(runs of one group, and parallel branches, edit the same files at once; a retry starts from what the failed attempt left) " +
			"and no record of what they changed (no branch, no commits, no \"what changed\" in the thread, dashboard or runs show --changes)",
			"remove workspaces.git: false, unless a folder is too large to check out per run (docs/workspaces.md)", false})
	}
	const rc = "pipelines.record_changes"
	if c.lines[rc] > 0 || c.fromEnv[rc] != "" {
		ps = append(ps, Problem{rc, "no longer does anything: a run's changes are the commits of its branch (workspaces.git), and without git workspaces nothing is recorded",
			"remove pipelines.record_changes", false})
	}
	return ps
}

func (c *Config) checkWorkspacesDir() []Problem {
	d := c.Workspaces.Dir
	if d == "" {
		return nil
	}
	if !filepath.IsAbs(d) {
		return []Problem{{"workspaces.dir", fmt.Sprintf("%q is not an absolute path", d), "write the shared directory's absolute path", true}}
	}
	groups, err := filepath.Abs(filepath.Join(c.DataDir, "groups"))
	if err == nil && (d == groups || strings.HasPrefix(d, groups+string(filepath.Separator)) || strings.HasPrefix(groups, d+string(filepath.Separator))) {
		return []Problem{{"workspaces.dir", fmt.Sprintf("%s overlaps the groups' folders, which agents write", d), "keep it outside data/groups", true}}
	}
	return nil
}
