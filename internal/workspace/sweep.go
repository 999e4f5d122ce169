package workspace

import (
	"context"
	"os"
	"path/filepath"
	"time"
)

// Sweep removes the working trees of finished runs: ended, by ended, more
// than retention ago. Their branches and side refs stay (a resumed or
// reopened run checks its branch out again); `nanohost runs prune`
// deletes branches. It returns how many trees it removed.
func (m *Manager) Sweep(ctx context.Context, retention time.Duration, ended func(ctx context.Context, runID string) (time.Time, bool)) int {
	dirs, _ := filepath.Glob(filepath.Join(m.opts.StateDir, "runs", "*", "state.json"))
	removed := 0
	for _, statePath := range dirs {
		if ctx.Err() != nil {
			break
		}
		stateDir := filepath.Dir(statePath)
		rs, err := readState(stateDir)
		if err != nil || rs.RunID == "" || !dirExists(rs.Dir) {
			continue
		}
		at, ok := ended(ctx, rs.RunID)
		if !ok || time.Since(at) < retention {
			continue
		}
		trees := []string{rs.Dir}
		states := []string{stateDir}
		branches, _ := filepath.Glob(filepath.Join(stateDir, "branches", "*"))
		for _, b := range branches {
			if bs, err := readState(b); err == nil {
				trees, states = append(trees, bs.Dir), append(states, b)
			}
		}
		if !m.within(trees) {
			m.log.Warn("a run's state names a tree outside the trees directory; left alone", "run", rs.RunID)
			continue
		}
		for i, t := range trees {
			if err := os.RemoveAll(t); err != nil {
				m.log.Warn("remove a finished run's working tree", "run", rs.RunID, "dir", t, "err", err)
				continue
			}
			os.Remove(filepath.Join(states[i], "index"))
		}
		removed++
		m.log.Info("removed a finished run's working tree; its branch stays", "run", rs.RunID, "branch", rs.Branch)
	}
	return removed
}

// within says every tree is under the manager's trees directory.
func (m *Manager) within(trees []string) bool {
	for _, t := range trees {
		rel, err := filepath.Rel(m.opts.TreesDir, t)
		if err != nil || !filepath.IsLocal(rel) {
			return false
		}
	}
	return true
}
