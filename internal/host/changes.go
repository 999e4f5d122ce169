package host

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"

	"nanohost/internal/changes"
	"nanohost/internal/channels"
	"nanohost/internal/config"
	"nanohost/internal/runlog"
	"nanohost/internal/runs"
	"nanohost/internal/workspace"
)

// Workspace change records (internal/changes): every agent and tool stage
// of a run records what it changed in its group's workspace, unless
// pipelines.record_changes is off.

// newChangeTracker is the host's tracker, with its snapshots in the state
// directory (data/state, outside every mounted folder); nil when off. The
// host closes it when it stops.
func newChangeTracker(cfg *config.Config, log *slog.Logger) (*changes.Tracker, error) {
	if !cfg.Pipelines.RecordChanges {
		return nil, nil
	}
	return changes.NewTracker(changes.Options{StateDir: filepath.Join(cfg.DataDir, "state"), Logger: log})
}

// recordedRun is a run's backend recording each stage's changes in the
// run's workspace; closing it also forgets the run's record (it stays on
// disk).
type recordedRun struct {
	*changes.Backend
	run     runs.RunBackend
	tracker *changes.Tracker
	runID   string
}

func (r recordedRun) Close() {
	r.run.Close()
	r.tracker.Forget(r.runID)
}

// gateLinks link a run's gate prompts to its changes since it started on
// the dashboard, once its stages changed something.
type gateLinks struct {
	cfg *config.Config
	log *slog.Logger
}

func (g gateLinks) of(_ context.Context, run runs.Run) []channels.Link {
	if run.LogsRoot == "" {
		return nil
	}
	root, err := os.OpenRoot(run.LogsRoot)
	if err != nil {
		return nil
	}
	defer root.Close()
	set, err := changes.ReadSet(root.FS(), changes.RunDir, false)
	if err != nil {
		if !errors.Is(err, changes.ErrNoRecord) {
			g.log.Warn("read the run's workspace changes for its gate", "run", run.ID, "err", err)
		}
		return nil
	}
	if len(set.Changes) == 0 {
		return nil
	}
	link := channels.Link{Text: "Changes since the run started: " + runlog.ChangeCounts(changes.Summary(set.Changes))}
	if base := g.cfg.DashboardURL(); base != "" {
		link.URL = base + "/runs/" + url.PathEscape(run.ID) + "#changes"
	}
	return []channels.Link{link}
}

// onBranch is the line a run's thread starts with: the branch the run
// works on and the base it started from ("" before it has one).
func (g gateLinks) onBranch(_ context.Context, run runs.Run) string {
	if run.LogsRoot == "" {
		return ""
	}
	ws, err := workspace.ReadSummaryAt(run.LogsRoot)
	if err != nil {
		return ""
	}
	return runlog.OnBranch(ws.Branch, ws.BaseBranch, run.GroupFolder, ws.Base)
}

// branchLinks name a run's branch under the message that it ended: its
// commits and what changed since its base (git workspaces), linked to its
// changes on the dashboard.
func (g gateLinks) branch(_ context.Context, run runs.Run) []channels.Link {
	if run.LogsRoot == "" {
		return nil
	}
	root, err := os.OpenRoot(run.LogsRoot)
	if err != nil {
		return nil
	}
	defer root.Close()
	ws, err := workspace.ReadSummary(root.FS())
	if err != nil {
		return nil
	}
	link := channels.Link{Text: runlog.Branch(ws.Branch, ws.Commits, ws.ChangeCounts)}
	if base := g.cfg.DashboardURL(); base != "" {
		link.URL = base + "/runs/" + url.PathEscape(run.ID) + "#changes"
	}
	links := []channels.Link{link}
	if d := ws.Delivery; d != nil {
		if d.PullRequest != "" {
			links = append(links, channels.Link{Text: runlog.PullRequestLink(d.PullRequestNumber), URL: d.PullRequest})
		}
		if d.FastForwarded {
			links = append(links, channels.Link{Text: runlog.FastForwarded(run.GroupFolder)})
		}
		for _, p := range d.Problems {
			links = append(links, channels.Link{Text: runlog.NotDelivered(p)})
		}
	}
	return links
}
