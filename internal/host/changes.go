package host

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"

	"nanohost/internal/changes"
	"nanohost/internal/channels"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/store"
)

// Workspace change records (internal/changes): every agent and tool stage
// of a run records what it changed in its group's workspace, unless
// pipelines.record_changes is off.

// newChangeTracker is the host's tracker, with its snapshots in the state
// directory (data/state, outside every mounted folder); nil when off.
func newChangeTracker(h *Host) (*changes.Tracker, error) {
	if !h.cfg.Pipelines.RecordChanges {
		return nil, nil
	}
	return changes.NewTracker(changes.Options{StateDir: filepath.Join(h.cfg.DataDir, "state"), Logger: h.log})
}

// runBackend is the backend a run's stages use: the agent backend,
// recording each stage's changes in the group's workspace.
func (h *Host) runBackend(group string) engine.Backend {
	if h.changes == nil {
		return h.backend
	}
	return h.changes.Wrap(h.backend, h.GroupDir(group))
}

// gateLinks links a run's gate prompts to its changes since it started on
// the dashboard, once its stages changed something.
func (h *Host) gateLinks(run store.Run) func(ctx context.Context) []channels.Link {
	if h.changes == nil || run.LogsRoot == "" {
		return nil
	}
	return func(context.Context) []channels.Link {
		root, err := os.OpenRoot(run.LogsRoot)
		if err != nil {
			return nil
		}
		defer root.Close()
		set, err := changes.ReadSet(root.FS(), changes.RunDir, false)
		if err != nil {
			if !errors.Is(err, changes.ErrNoRecord) {
				h.log.Warn("read the run's workspace changes for its gate", "run", run.ID, "err", err)
			}
			return nil
		}
		if len(set.Changes) == 0 {
			return nil
		}
		link := channels.Link{Text: "Changes since the run started: " + changes.Summary(set.Changes).String()}
		if base := h.cfg.DashboardURL(); base != "" {
			link.URL = base + "/runs/" + url.PathEscape(run.ID) + "#changes"
		}
		return []channels.Link{link}
	}
}
