//go:build !lean

package main

// `pipeline run --workspace DIR` with DIR a git repository: the run works
// on its own branch nanohost/<run> in a working tree of its own
// (internal/workspace), so two commands on one repository never see each
// other's edits; DIR's own files and checkout are left alone.

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	gitws "nanohost/internal/workspace"
)

// gitDirOf is DIR/.git when it is a repository's directory ("" otherwise:
// a plain folder, or a linked worktree's .git file, works in place).
func gitDirOf(dir string) string {
	gitDir := filepath.Join(dir, ".git")
	if fi, err := os.Lstat(filepath.Join(gitDir, "HEAD")); err == nil && fi.Mode().IsRegular() {
		if abs, err := filepath.Abs(gitDir); err == nil {
			return abs
		}
	}
	return ""
}

// openRunBranch gives the run its branch in gitDir (the base is its HEAD)
// and its working tree under the state directory, outside the repository.
func openRunBranch(ctx context.Context, stateDir, runID, dir, gitDir string) (*gitws.Run, error) {
	m, err := gitws.New(gitws.Options{StateDir: filepath.Join(stateDir, "workspaces"), TreesDir: filepath.Join(stateDir, "worktrees")})
	if err != nil {
		return nil, err
	}
	ws, err := m.Open(ctx, runID, gitws.Source{Name: filepath.Base(dir), Folder: dir, GitDir: gitDir})
	if err != nil {
		return nil, fmt.Errorf("--workspace %s: %w", dir, err)
	}
	return ws, nil
}

// branched is a run backend working on a branch.
type branched interface{ Branch() *gitws.Run }

// branchJSON is what --json adds for a run on a branch.
type branchJSON struct {
	Branch  string   `json:"branch"`
	Base    string   `json:"base"`
	Commits []string `json:"commits"`
	// Tree is the run's working tree (removed by housekeeping).
	Tree string `json:"tree"`
}

// branchOf describes the branch of backend's run (nil: none).
func branchOf(backend runBackend) *branchJSON {
	b, ok := backend.(branched)
	if !ok || b.Branch() == nil {
		return nil
	}
	ws := b.Branch()
	out := &branchJSON{Branch: ws.Branch, Base: ws.Base.String(), Commits: []string{}, Tree: ws.Dir}
	if commits, err := ws.Commits(); err == nil {
		for _, c := range commits {
			out.Commits = append(out.Commits, c.Hash.String())
		}
	}
	return out
}

// printBranch tells where the run's work is.
func printBranch(w io.Writer, b *branchJSON) {
	fmt.Fprintf(w, "branch %s: %d commit(s) on %.12s (git log -p %s)\n", b.Branch, len(b.Commits), b.Base, b.Branch)
}
