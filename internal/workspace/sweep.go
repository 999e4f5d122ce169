package workspace

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// SweepReport is what a sweep removed and what it left.
type SweepReport struct {
	Removed int   // runs whose trees were removed
	Trees   int   // runs' working trees left (parallel branches' included)
	Bytes   int64 // disk they use
	// Spares are the spare trees kept for the next runs (Options.Spares),
	// counted apart from the runs' trees; SpareBytes is their disk.
	Spares     int
	SpareBytes int64
}

// Sweep removes the working trees of finished runs: ended, by ended, more
// than retention ago. Their branches and side refs stay (a resumed or
// reopened run checks its branch out again); `nanohost runs prune`
// deletes branches. It also removes the spare trees an earlier process left
// half made (or no longer wanted) and those no run took within retention.
// It reports the trees left and their disk use, runs' and spares apart.
func (m *Manager) Sweep(ctx context.Context, retention time.Duration, ended func(ctx context.Context, runID string) (time.Time, bool)) SweepReport {
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
	rep := SweepReport{Removed: removed}
	rep.Spares, rep.SpareBytes = m.spares.sweep(retention)
	trees, _ := os.ReadDir(m.opts.TreesDir)
	for _, t := range trees {
		if t.IsDir() && t.Name() != spareDirName {
			rep.Trees++
			rep.Bytes += diskUse(filepath.Join(m.opts.TreesDir, t.Name()))
		}
	}
	return rep
}

// diskUse is the disk a directory's files take (their allocated blocks;
// links not followed).
func diskUse(dir string) int64 {
	var total int64
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				total += st.Blocks * 512
			}
		}
		return nil
	})
	return total
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
