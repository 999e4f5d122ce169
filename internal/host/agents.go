package host

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"nanohost/internal/config"
	"nanohost/internal/container"
	"nanohost/internal/mounts"
	"nanohost/internal/runs"
	"nanohost/internal/workspace"
)

// Agents runs agent work in containers: a run's nodes, and each group's
// chat conversation. ContainerAgents adapts the container backend.
type Agents interface {
	// ForRun is the engine's backend for one run, working in env.
	ForRun(runID string, env container.RunEnv) runs.RunBackend
	// Conversation opens a group's chat conversation (see container.Conversation).
	Conversation(name string, env container.RunEnv, sessionID string) Conversation
}

// Conversation is a chat with one agent.
type Conversation interface {
	Send(ctx context.Context, prompt string, timeout time.Duration) (container.Reply, error)
	Close()
}

// ContainerAgents are Agents in containers of b.
func ContainerAgents(b *container.Backend) Agents { return containerAgents{b} }

type containerAgents struct{ b *container.Backend }

func (c containerAgents) ForRun(runID string, env container.RunEnv) runs.RunBackend {
	return c.b.ForRun(runID, env)
}

func (c containerAgents) Conversation(name string, env container.RunEnv, sessionID string) Conversation {
	return c.b.Conversation(name, env, sessionID)
}

// agentEnv says where a group's agents work: its workspace, its IPC queues,
// the skills, and its configured extra mounts (validated against the mount
// allowlist at start-up).
type agentEnv struct {
	folders groupFolders
	root    string
	extra   map[string][]mounts.Mount
}

func (e agentEnv) of(folder string) container.RunEnv {
	env := container.RunEnv{Group: folder, Workspace: e.folders.dir(folder), ExtraMounts: e.extra[folder]}
	if abs, err := filepath.Abs(e.folders.ipcDir(folder)); err == nil {
		env.GroupIPC = abs
	}
	if skills, err := filepath.Abs(filepath.Join(e.root, "skills")); err == nil {
		if st, err := os.Stat(skills); err == nil && st.IsDir() {
			env.Skills = skills
		}
	}
	return env
}

// runtime binds runs to their group's containers (runs.Runtime), each run
// on its own branch and working tree (workspaces.git).
type runtime struct {
	agents     Agents
	env        agentEnv
	workspaces *workspace.Manager // nil: runs work in the group's folder, unrecorded
	cfg        *config.Config
	sessions   forkSessions // nil: no run continues an agent's chat
}

// forkSessions are the agent sessions the store keeps per group.
type forkSessions interface {
	GetSession(ctx context.Context, folder, threadKey string) (string, error)
	SetSession(ctx context.Context, folder, threadKey, sessionID string) error
}

// forkThreadKey is where the store keeps the chat session a run's
// full-fidelity stages fork: taken once, so a resumed run (on any replica)
// forks the same session however the chat went on meanwhile.
func forkThreadKey(runID string) string { return "fork:" + runID }

// forkSource is the agent session run continues (container.RunEnv.ForkSession):
// for a pipeline a group's agent started over IPC, its chat's session when
// the run first started, recorded then; "" for any other run, and for an
// agent with no conversation yet.
func (r runtime) forkSource(ctx context.Context, run runs.Run) string {
	if r.sessions == nil || run.Parent != "" || run.StartedBy != agent(run.GroupFolder).User {
		return ""
	}
	if sid, err := r.sessions.GetSession(ctx, run.GroupFolder, forkThreadKey(run.ID)); err == nil && sid != "" {
		return sid
	}
	sid, err := r.sessions.GetSession(ctx, run.GroupFolder, chatThreadKey)
	if err != nil || sid == "" {
		return ""
	}
	if err := r.sessions.SetSession(ctx, run.GroupFolder, forkThreadKey(run.ID), sid); err != nil {
		slog.Warn("record the session a run forks; a resumed run forks the chat's session then", "run", run.ID, "err", err)
	}
	return sid
}

func (r runtime) ForRun(ctx context.Context, run runs.Run) (runs.RunBackend, error) {
	if r.workspaces != nil {
		return r.onBranch(ctx, run)
	}
	env := r.env.of(run.GroupFolder)
	env.ForkSession = r.forkSource(ctx, run)
	return r.agents.ForRun(run.ID, env), nil
}

func ipcRoot(cfg *config.Config) string { return filepath.Join(cfg.DataDir, "ipc") }

// mountRefusal is the error New returns when a group asks for a mount the
// allowlist refuses: the host does not start with a group missing a
// directory it was promised.
func mountRefusal(problems []config.Problem) error {
	var lines []string
	for _, p := range problems {
		if p.Blocking {
			lines = append(lines, p.String())
		}
	}
	if len(lines) == 0 {
		return nil
	}
	return errors.New("host: refusing to start: " + strings.Join(lines, "; "))
}
