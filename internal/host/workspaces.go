package host

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"nanohost/internal/config"
	"nanohost/internal/container"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runs"
	"nanohost/internal/workspace"
)

// Git workspaces (internal/workspace, docs/workspaces.md): every run works
// on its own branch in its own working tree, a commit per stage, unless
// workspaces.git is off.

// newWorkspaces is the host's workspace manager, with its repositories in
// the state directory (data/state, outside every mounted folder) and the
// runs' working trees in data/worktrees; nil when off.
func newWorkspaces(cfg *config.Config, log *slog.Logger) (*workspace.Manager, error) {
	w := cfg.Workspaces
	if !w.Git {
		return nil, nil
	}
	state := filepath.Join(cfg.DataDir, "state", "workspaces")
	if w.Dir != "" {
		state = w.Dir // shared by replicas: a run taken over continues its branch
	}
	return workspace.New(workspace.Options{
		StateDir: state,
		TreesDir: filepath.Join(cfg.DataDir, "worktrees"),
		Author:   workspace.Author{Name: w.AuthorName, Email: w.AuthorEmail},
		Limits:   workspace.Limits{MaxFileBytes: w.MaxFileBytes, MaxStageBytes: w.MaxStageBytes, MaxTreeBytes: w.MaxTreeBytes},
		Logger:   log,
		AgentUID: container.DefaultAgentUID, AgentGID: container.DefaultAgentGID,
		Spares: w.Spares,
	})
}

// branchRun is a run's backend working in the run's own tree and
// committing each stage to its branch; each parallel branch's agents work
// in the branch's tree (a child run of the container backend).
type branchRun struct {
	*workspace.Backend
	run runs.RunBackend

	mu       sync.Mutex
	branches []runs.RunBackend

	// what the run delivers when it succeeds (groups[].push, pull_request, merge)
	deliver delivery
}

func (b *branchRun) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, br := range b.branches {
		br.Close()
	}
	b.run.Close()
}

// onBranch gives a run its branch and working tree, and its agents that tree.
func (r runtime) onBranch(ctx context.Context, run runs.Run) (runs.RunBackend, error) {
	env := r.env.of(run.GroupFolder)
	env.ForkSession = r.forkSource(ctx, run)
	src := workspace.Source{Name: run.GroupFolder, Folder: env.Workspace}
	group := groupConfig(r.cfg, run.GroupFolder)
	if group.Repo != "" {
		src.Remote, src.BaseBranch, src.Token = group.Repo, group.Base, group.RepoToken.Reveal()
	}
	ws, err := r.workspaces.Open(ctx, run.ID, src)
	if err != nil {
		return nil, err
	}
	ws.RecordStart(run.LogsRoot) // the thread's first line names the branch and its base
	branchEnv := env
	env.Workspace = ws.Dir
	backend := r.agents.ForRun(run.ID, env)
	br := &branchRun{run: backend, deliver: delivery{cfg: r.cfg, group: group, src: src, run: run}}
	br.Backend = ws.Wrap(backend).WithBranches(func(branch, dir string) engine.Backend {
		e := branchEnv
		e.Workspace = dir
		b := r.agents.ForRun(run.ID+"."+workspace.BranchKey(branch), e)
		br.mu.Lock()
		br.branches = append(br.branches, b)
		br.mu.Unlock()
		return b
	})
	return br, nil
}

// runGetter reads a run's record (the store).
type runGetter interface {
	GetRun(ctx context.Context, id string) (runs.Run, error)
}

// sweepTrees removes finished runs' working trees once they are older than
// workspaces.retention: at start and then every tenth of it (at most
// hourly); their branches stay.
func sweepTrees(ctx context.Context, spaces *workspace.Manager, retention time.Duration, st runGetter, m *Metrics) {
	if retention <= 0 {
		retention = 24 * time.Hour
	}
	ended := func(ctx context.Context, id string) (time.Time, bool) {
		run, err := st.GetRun(ctx, id)
		return run.FinishedAt, err == nil && run.Status.Finished() && !run.FinishedAt.IsZero()
	}
	tick := time.NewTicker(min(retention/10+time.Second, time.Hour))
	defer tick.Stop()
	for {
		rep := spaces.Sweep(ctx, retention, ended)
		m.worktrees(rep)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
