//go:build !lean

package main

// `pipeline run --workspace DIR`: the run works on its own branch
// nanohost/<run> in a working tree of its own (internal/workspace), so two
// commands on one folder never see each other's edits. With DIR a git
// repository the branch is made in it and DIR's own files and checkout are
// left alone; with DIR a plain folder the branch is in a repository nanohost
// keeps for the folder under the state directory, and a succeeded run's
// result is written back into DIR when nothing else changed it meanwhile
// (--fast-forward).

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"

	"nanohost/internal/pipeline/engine"
	gitws "nanohost/internal/workspace"
)

// gitDirOf is DIR/.git when it is a repository's directory ("" otherwise:
// a plain folder, or a linked worktree's .git file, is snapshotted).
func gitDirOf(dir string) string {
	gitDir := filepath.Join(dir, ".git")
	if fi, err := os.Lstat(filepath.Join(gitDir, "HEAD")); err == nil && fi.Mode().IsRegular() {
		if abs, err := filepath.Abs(gitDir); err == nil {
			return abs
		}
	}
	return ""
}

// folderSource is where a plain folder's runs start from: a snapshot of it
// in the repository kept for it, STATE/workspaces/repos/<name>-<hash>.git,
// keyed by its real path so that two folders of one name keep apart.
func folderSource(dir string) (gitws.Source, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return gitws.Source{}, err
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	sum := sha256.Sum256([]byte(abs))
	return gitws.Source{Name: filepath.Base(abs) + "-" + hex.EncodeToString(sum[:6]), Folder: abs}, nil
}

// openRunBranch gives the run its branch and its working tree under the
// state directory: in dir's repository (the base is its HEAD), or for a
// plain folder in the repository kept for it (the base is the folder's
// snapshot as the run starts).
func openRunBranch(ctx context.Context, stateDir, runID, dir string) (*gitws.Run, gitws.Source, error) {
	m, err := gitws.New(gitws.Options{StateDir: filepath.Join(stateDir, "workspaces"), TreesDir: filepath.Join(stateDir, "worktrees")})
	if err != nil {
		return nil, gitws.Source{}, err
	}
	src := gitws.Source{Name: filepath.Base(dir), Folder: dir, GitDir: gitDirOf(dir)}
	if src.GitDir == "" {
		if src, err = folderSource(dir); err != nil {
			return nil, src, err
		}
	}
	ws, err := m.Open(ctx, runID, src)
	if err != nil {
		return nil, src, fmt.Errorf("--workspace %s: %w", dir, err)
	}
	return ws, src, nil
}

// fastForwardFlag is --fast-forward (false where the flag is not defined).
func fastForwardFlag(fs *pflag.FlagSet) bool {
	on, err := fs.GetBool("fast-forward")
	return err == nil && on
}

// folderResult is what became of a plain folder's succeeded run: written
// into the folder, or kept on the branch and why.
type folderResult struct {
	src gitws.Source // zero: DIR is a repository, never written
	on  bool         // --fast-forward

	fastForwarded bool
	problem       string
}

// Conclude implements engine.Concluder: a succeeded run on a plain folder
// is written into it when the folder still holds the run's base; else the
// folder is left alone, a warning says why, and the result stays on the
// branch. What happened is recorded in the run's workspace.json. A
// resume concludes again a run killed before it told its end
// (Engine.TellEnd): a delivery recorded already is not done again, and a
// fast-forward cut off half-way is finished (workspace.Run.FastForward).
func (d containerRunBackend) Conclude(ctx context.Context, c engine.Conclusion) []string {
	f := d.folder
	if f == nil || !f.on || f.src.Folder == "" {
		return nil
	}
	head, err := d.branch.Head()
	if err != nil || head == d.branch.Base {
		return nil // nothing to write
	}
	if s, err := gitws.ReadSummaryAt(c.RunDir); err == nil && s.Delivery != nil {
		// delivered before the process was killed (a resume tells the end)
		f.fastForwarded = s.Delivery.FastForwarded
		if len(s.Delivery.Problems) > 0 {
			f.problem = s.Delivery.Problems[0]
		}
		return nil
	}
	var out gitws.Delivery
	if err := d.branch.FastForward(ctx, f.src); err != nil {
		f.problem = err.Error()
		var nff *gitws.NotFastForwardError
		if errors.As(err, &nff) {
			f.problem = fmt.Sprintf("%s changed since the run started, so the result stays on %s", f.src.Folder, d.branch.Branch)
		}
		out.Problems = []string{f.problem}
	} else {
		f.fastForwarded, out.FastForwarded = true, true
	}
	if err := d.branch.RecordDelivery(c.RunDir, out); err != nil {
		out.Problems = append(out.Problems, "record what the run delivered: "+err.Error())
	}
	return out.Problems
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
	// GitDir is the repository holding the branch: DIR's own, or the one
	// kept for a plain folder.
	GitDir string `json:"git_dir"`
	// Folder is the plain folder the run started from ("" for a
	// repository); FastForwarded says the result was written into it, and
	// NotFastForwarded why it was not.
	Folder           string `json:"folder,omitempty"`
	FastForwarded    bool   `json:"fast_forwarded,omitempty"`
	NotFastForwarded string `json:"not_fast_forwarded,omitempty"`
}

// branchOf describes the branch of backend's run (nil: none).
func branchOf(backend runBackend) *branchJSON {
	b, ok := backend.(branched)
	if !ok || b.Branch() == nil {
		return nil
	}
	ws := b.Branch()
	out := &branchJSON{Branch: ws.Branch, Base: ws.Base.String(), Commits: []string{}, Tree: ws.Dir, GitDir: ws.GitDir()}
	if f := backendFolder(backend); f != nil && f.src.Folder != "" {
		out.Folder, out.FastForwarded, out.NotFastForwarded = f.src.Folder, f.fastForwarded, f.problem
	}
	if commits, err := ws.Commits(); err == nil {
		for _, c := range commits {
			out.Commits = append(out.Commits, c.Hash.String())
		}
	}
	return out
}

// backendFolder is the plain folder's result of backend's run (nil: none).
func backendFolder(backend runBackend) *folderResult {
	if d, ok := backend.(interface{ folderOf() *folderResult }); ok {
		return d.folderOf()
	}
	return nil
}

func (d containerRunBackend) folderOf() *folderResult { return d.folder }

// printBranch tells where the run's work is.
func printBranch(w io.Writer, b *branchJSON) {
	show := "git log -p " + b.Branch
	if b.Folder != "" {
		show = "git --git-dir=" + b.GitDir + " log -p " + b.Branch
	}
	fmt.Fprintf(w, "branch %s: %d commit(s) on %.12s (%s)\n", b.Branch, len(b.Commits), b.Base, show)
	switch {
	case b.FastForwarded:
		fmt.Fprintf(w, "the result is now in %s\n", b.Folder)
	case b.NotFastForwarded != "":
		fmt.Fprintf(w, "not written into the folder: %s\n", b.NotFastForwarded)
	}
}
