package host

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"os"

	"nanohost/internal/channels"
	"nanohost/internal/config"
	"nanohost/internal/runlog"
	"nanohost/internal/runs"
	"nanohost/internal/workspace"
)

// What a run changed is the commits of its branch (internal/workspace):
// each stage's change record and the run's are derived from them.

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
	set, err := workspace.ReadSet(root.FS(), workspace.RunDir, false)
	if err != nil {
		if !errors.Is(err, workspace.ErrNoRecord) {
			g.log.Warn("read the run's workspace changes for its gate", "run", run.ID, "err", err)
		}
		return nil
	}
	if len(set.Changes) == 0 {
		return nil
	}
	link := channels.Link{Text: "Changes since the run started: " + runlog.ChangeCounts(workspace.CountChanges(set.Changes))}
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
		if d.PullRequest != "" && !d.PullRequestByPipeline { // the node's event showed it
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
