package container

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"nanohost/internal/mounts"
	"nanohost/internal/pipeline/engine"
)

// Config configures a Backend. Zero values get the documented defaults
// (docs/agent-protocol.md, "Security defaults").
type Config struct {
	// Runtime runs the containers (required), e.g. NewDocker().
	Runtime Runtime
	// Image is the agent image (default DefaultImage).
	Image string
	// HostID identifies this host's data directory (see LoadHostID); it
	// labels every container so orphans can be found after a crash.
	HostID string
	// StateDir holds per-container IPC directories and the agents' session
	// stores (required). Keep it outside every workspace.
	StateDir string

	// Workspace is the host directory mounted at /workspace/group, and
	// Group its name, for runs not bound with ForRun.
	Workspace string
	Group     string
	// ExtraMounts are additional mounts, already validated by a MountPolicy.
	ExtraMounts []mounts.Mount
	// MaskMounts are the folders and skills each mask grants
	// (mounts.MaskGrants), by mask name, mounted only for a node wearing the
	// mask. Every mask a node may wear needs an entry, even an empty one.
	MaskMounts map[string][]mounts.Mount

	Agent AgentConfig
	// Agents maps an llm_provider to the agent that serves its nodes
	// (runtime.agents); a node naming no provider gets Agent. A node naming
	// a provider Agents lacks is refused when Agents is set (lint's
	// provider_known says so before the run).
	Agents map[string]AgentConfig
	// Secrets go to the agent process's environment only, via stdin. With
	// a Gateway, model credentials belong to the gateway, never here.
	Secrets map[string]string
	// Gateway, when set, is the host's model gateway: every agent container
	// gets a token of its own in place of a key, and its calls are metered
	// and budgeted there (internal/gateway).
	Gateway *Gateway

	Limits Limits
	// Network is "bridge" (default: agents need their API) or "none".
	Network string
	// User is the container user "uid:gid"; default: see resolveUser.
	User string
	// HomeDir is the agent's HOME, a fresh tmpfs owned by the container
	// user. It must not exist in the image: Docker would copy the image
	// directory's owner and mode over the tmpfs options.
	HomeDir string
	// TmpfsSize bounds /tmp and HOME (default "512m").
	TmpfsSize string
	// TZ is the containers' time zone (default: the host's, see HostTimezone).
	TZ string

	// MaxContainers caps running containers across all runs (default 5).
	MaxContainers int
	// IdleTimeout closes a live full-fidelity session nobody used for that
	// long (default 10m); its agent session resumes in a new container.
	IdleTimeout time.Duration
	// MaxToolOutput bounds Result.Output of tool nodes (default 64 KiB);
	// MaxToolLog bounds each of the stage's stdout/stderr files (default 10 MiB).
	MaxToolOutput int
	MaxToolLog    int64

	Logger *slog.Logger
	// OnEvent, when set, hears about container lifecycle (tests, verbose events).
	OnEvent func(Event)
}

// AgentConfig says how nanoagent answers prompts.
type AgentConfig struct {
	// Kind is "claude" (default), "command" or "script".
	Kind string
	// Command is the shell command line of a CLI agent (Kind "command").
	Command string
	// ScriptFile is the host path of a script (Kind "script"), mounted read-only.
	ScriptFile string
	// ClaudeArgs overrides nanoagent's extra arguments for the Claude CLI.
	ClaudeArgs string
	// Watch is how nanoagent notices follow-ups: "inotify" (default) or "poll".
	Watch string
	// ClaudeBin is the Claude Code executable inside the image (default
	// "claude" on its PATH).
	ClaudeBin string
}

// check validates a and fills its defaults; provider names the mapping
// it came from ("" for the default agent).
func (a *AgentConfig) check(provider string) error {
	where := "container backend"
	if provider != "" {
		where = fmt.Sprintf("container backend: the agent of provider %s", provider)
	}
	if a.Kind == "" {
		a.Kind = "claude"
	}
	switch a.Kind {
	case "claude":
	case "command":
		if strings.TrimSpace(a.Command) == "" {
			return fmt.Errorf("%s: agent kind command needs a Command (a shell command line reading the prompt on stdin)", where)
		}
	case "script":
		if a.ScriptFile == "" {
			return fmt.Errorf("%s: agent kind script needs a ScriptFile", where)
		}
		abs, err := filepath.Abs(a.ScriptFile)
		if err != nil {
			return err
		}
		if _, err := os.Stat(abs); err != nil {
			return fmt.Errorf("script file: %w", err)
		}
		a.ScriptFile = abs
	default:
		return fmt.Errorf("%s: unknown agent kind %q (want claude, command or script)", where, a.Kind)
	}
	return nil
}

// NoAgentError refuses a node whose llm_provider no configured agent serves.
type NoAgentError struct {
	Node, Provider string
	Configured     []string
}

func (e *NoAgentError) Error() string {
	return fmt.Sprintf("node %s names llm_provider %q, which no agent serves (runtime.agents maps %s)", e.Node, e.Provider, strings.Join(e.Configured, ", "))
}

// agentFor is the agent that serves req: its provider's, else the default.
func (c *Config) agentFor(req engine.Request) (AgentConfig, error) {
	p := strings.ToLower(strings.TrimSpace(req.Provider))
	if p == "" || len(c.Agents) == 0 {
		return c.Agent, nil
	}
	if a, ok := c.Agents[p]; ok {
		return a, nil
	}
	return AgentConfig{}, &NoAgentError{Node: req.NodeID, Provider: req.Provider, Configured: slices.Sorted(maps.Keys(c.Agents))}
}

// DefaultImage is the production agent image built from the Dockerfile.
const DefaultImage = "nanohost-agent:latest"

// Defaults.
const (
	DefaultMaxContainers = 5
	DefaultIdleTimeout   = 10 * time.Minute
	DefaultHomeDir       = "/home/agent"
	DefaultNetwork       = "bridge"
	DefaultTmpfsSize     = "512m"
)

// DefaultLimits are applied to every container unless configured.
var DefaultLimits = Limits{MemoryBytes: 2 << 30, CPUs: 2, Pids: 512}

// withDefaults fills each unset (zero) limit from DefaultLimits; a negative
// limit means "no limit" and becomes zero.
func (l Limits) withDefaults() Limits {
	pick := func(v, def int64) int64 {
		switch {
		case v == 0:
			return def
		case v < 0:
			return 0
		}
		return v
	}
	l.MemoryBytes = pick(l.MemoryBytes, DefaultLimits.MemoryBytes)
	l.Pids = pick(l.Pids, DefaultLimits.Pids)
	switch {
	case l.CPUs == 0:
		l.CPUs = DefaultLimits.CPUs
	case l.CPUs < 0:
		l.CPUs = 0
	}
	return l
}

func (c *Config) applyDefaults() error {
	if c.Runtime == nil {
		return errors.New("container backend: no Runtime configured")
	}
	if c.StateDir == "" {
		return errors.New("container backend: no StateDir configured (it holds IPC directories and agent sessions)")
	}
	if c.HostID == "" {
		return errors.New("container backend: no HostID configured (see container.LoadHostID)")
	}
	if c.Image == "" {
		c.Image = DefaultImage
	}
	if c.Group == "" {
		c.Group = "main"
	}
	if err := c.Agent.check(""); err != nil {
		return err
	}
	for provider, a := range c.Agents {
		if err := a.check(provider); err != nil {
			return err
		}
		c.Agents[provider] = a
	}
	c.Limits = c.Limits.withDefaults()
	if c.Network == "" {
		c.Network = DefaultNetwork
	}
	if c.HomeDir == "" {
		c.HomeDir = DefaultHomeDir
	}
	if c.TmpfsSize == "" {
		c.TmpfsSize = DefaultTmpfsSize
	}
	if c.TZ == "" {
		c.TZ = HostTimezone()
	}
	if c.MaxContainers <= 0 {
		c.MaxContainers = DefaultMaxContainers
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.MaxToolOutput <= 0 {
		c.MaxToolOutput = 64 << 10
	}
	if c.MaxToolLog <= 0 {
		c.MaxToolLog = 10 << 20
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// HostTimezone is the host's time zone as an IANA name the agent image's
// tzdata understands: $TZ, else /etc/timezone, else the zone /etc/localtime
// links to; "" when none is known (the image's default, UTC, applies).
func HostTimezone() string { return timezoneFrom(os.Getenv("TZ"), "/etc") }

var zoneName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_+\-]*(/[A-Za-z0-9_+\-]+)*$`)

func timezoneFrom(env, etc string) string {
	// A zone name or a POSIX rule ("CET-1CEST,M3.5.0,M10.5.0/3") works as
	// is; ":Europe/Paris" is glibc's spelling of a zone file, but a path
	// (":/etc/localtime") means nothing inside the container.
	if tz, isFile := strings.CutPrefix(env, ":"); !isFile && env != "" || isFile && zoneName.MatchString(tz) {
		return tz
	}
	if data, err := os.ReadFile(filepath.Join(etc, "timezone")); err == nil {
		if tz := strings.TrimSpace(string(data)); zoneName.MatchString(tz) {
			return tz
		}
	}
	if link, err := os.Readlink(filepath.Join(etc, "localtime")); err == nil {
		if _, tz, ok := strings.Cut(link, "zoneinfo/"); ok && zoneName.MatchString(tz) {
			return tz
		}
	}
	return ""
}

// DefaultAgentUID and DefaultAgentGID are the container user when the host
// runs as root and root owns the workspace: agents never run as root.
const (
	DefaultAgentUID = 1000
	DefaultAgentGID = 1000
)

// resolveUser picks the container user for a workspace. Never root: an
// explicit User wins; a non-root host runs agents as itself (so files in the
// workspace keep their owner); a root host uses the workspace owner, or
// 1000:1000 when root owns the workspace too.
func resolveUser(configured, workspace string) (uid, gid int, err error) {
	if configured != "" {
		return parseUser(configured)
	}
	if os.Geteuid() != 0 {
		return os.Geteuid(), os.Getegid(), nil
	}
	if st, err := os.Stat(workspace); err == nil {
		if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Uid != 0 {
			return int(sys.Uid), int(sys.Gid), nil
		}
	}
	return DefaultAgentUID, DefaultAgentGID, nil
}

func parseUser(s string) (int, int, error) {
	u, g, hasGroup := strings.Cut(s, ":")
	uid, err := strconv.Atoi(u)
	if err != nil || uid < 0 {
		return 0, 0, fmt.Errorf("container user %q: want numeric uid[:gid]", s)
	}
	gid := uid
	if hasGroup {
		if gid, err = strconv.Atoi(g); err != nil || gid < 0 {
			return 0, 0, fmt.Errorf("container user %q: want numeric uid[:gid]", s)
		}
	}
	if uid == 0 {
		return 0, 0, fmt.Errorf("container user %q: agents never run as root", s)
	}
	return uid, gid, nil
}
