package workspace

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"

	"nanohost/internal/pipeline/engine"
)

// Parallel branches: each works in a tree of its own on a ref of its own
// (refs/nanohost/branches/<run>/<branch path>), forked from the workspace
// the parallel node runs in; their work is merged back, in edge order, by a
// three-way merge (git merge-tree on the host's git directory).

// TrailerConflict records a path a merge left conflicted.
const TrailerConflict = "Nanohost-Conflict"

// BranchKey names a parallel branch in file names and child run ids.
func BranchKey(branch string) string { return "branch-" + unsafeRefChars.ReplaceAllString(branch, "_") }

var _ engine.BranchWorkspaces = (*Backend)(nil)

// at is the workspace of a branch path ("" the run's own).
func (run *Run) at(branch string) (*Run, error) {
	if branch == "" {
		return run, nil
	}
	run.bmu.Lock()
	defer run.bmu.Unlock()
	if b, ok := run.branches[branch]; ok {
		return b, nil
	}
	// not forked in this process: a resumed run's branch that finished before
	rs, err := readState(run.branchStateDir(branch))
	if err != nil {
		return nil, fmt.Errorf("branch %s has no workspace (it was not forked): %w", branch, err)
	}
	b, err := run.m.reopen(run.ID, run.branchStateDir(branch), rs)
	if err != nil {
		return nil, err
	}
	run.keep(branch, b)
	return b, nil
}

func (run *Run) keep(branch string, b *Run) {
	if run.branches == nil {
		run.branches = map[string]*Run{}
	}
	run.branches[branch] = b
}

func (run *Run) branchStateDir(branch string) string {
	return filepath.Join(run.stateDir, "branches", unsafeRefChars.ReplaceAllString(branch, "_"))
}

func readState(dir string) (runState, error) {
	var rs runState
	data, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err == nil {
		err = json.Unmarshal(data, &rs)
	}
	return rs, err
}

// ForkBranches implements engine.BranchWorkspaces: each branch gets a
// tree at from's last commit — the one it has when it forked from that
// very commit already (a resumed parallel node), a fresh one otherwise.
func (b *Backend) ForkBranches(ctx context.Context, from string, branches []string) error {
	if b.forBranch == nil {
		return nil
	}
	src, err := b.run.at(from)
	if err != nil {
		return err
	}
	head, err := src.Head()
	if err != nil {
		return err
	}
	for _, br := range branches {
		if err := b.run.fork(br, head); err != nil {
			return fmt.Errorf("fork branch %s: %w", br, err)
		}
	}
	return nil
}

func (run *Run) fork(branch string, head plumbing.Hash) error {
	dir := run.branchStateDir(branch)
	if rs, err := readState(dir); err == nil && rs.Base == head.String() {
		run.bmu.Lock()
		_, ok := run.branches[branch]
		run.bmu.Unlock()
		if ok {
			return nil
		}
		child, err := run.m.reopen(run.ID, dir, rs)
		if err != nil {
			return err
		}
		run.bmu.Lock()
		run.keep(branch, child)
		run.bmu.Unlock()
		return nil
	}
	short := ShortID(run.ID)
	safe := unsafeRefChars.ReplaceAllString(branch, "_")
	child := &Run{ID: run.ID, Branch: run.Branch, Base: head, Dir: filepath.Join(run.m.opts.TreesDir, short+"--"+safe),
		m: run.m, repo: run.repo, stateDir: dir, owner: run.owner,
		ref: plumbing.ReferenceName(fmt.Sprintf("refs/nanohost/branches/%s/%s", short, safe))}
	old, err := run.repo.ref(child.ref)
	if err != nil {
		return err
	}
	if err := run.repo.setRef(child.ref, head, old); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if ix, err := loadIndex(filepath.Join(dir, "index")); err == nil && dirExists(child.Dir) {
		child.ix = ix // the tree of an earlier visit: reset, not rewritten
	}
	if err := child.materialize(head); err != nil {
		return err
	}
	if err := child.saveState(nil); err != nil {
		return err
	}
	run.bmu.Lock()
	run.keep(branch, child)
	run.bmu.Unlock()
	return nil
}

// MergeBranches implements engine.BranchWorkspaces: the branches' work is
// merged into into's, one merge commit per branch that changed something,
// and into's tree is checked out at the result — with conflict markers in
// the files both sides changed, which come back as conflicts.
func (b *Backend) MergeBranches(ctx context.Context, into string, branches []string, node string, execution int) ([]engine.MergeConflict, error) {
	if b.forBranch == nil {
		return nil, nil
	}
	dst, err := b.run.at(into)
	if err != nil {
		return nil, err
	}
	dst.mu.Lock()
	defer dst.mu.Unlock()
	head, err := dst.Head()
	if err != nil {
		return nil, err
	}
	if c, err := dst.repo.commit(head); err == nil {
		t := Trailers(c.Message)
		if t[TrailerNode] == node && t[TrailerExecution] == strconv.Itoa(execution) && t[TrailerRun] == b.run.ID {
			return conflictsOf(c.Message), nil // merged before the host stopped
		}
	}
	touched := map[string][]string{} // path → the branches (first nodes) that changed it
	var conflicts []engine.MergeConflict
	cur := head
	for _, br := range branches {
		child, err := b.run.at(br)
		if err != nil {
			return nil, err
		}
		ch, err := child.Head()
		if err != nil {
			return nil, err
		}
		if ch == child.Base {
			continue // the branch changed nothing
		}
		name := path.Base(br)
		changed, err := dst.repo.git(ctx, nil, "diff-tree", "-r", "-z", "--name-only", "--no-renames", child.Base.String(), ch.String())
		if err != nil {
			return nil, err
		}
		for _, p := range strings.Split(strings.TrimRight(string(changed), "\x00"), "\x00") {
			if p != "" {
				touched[p] = append(touched[p], name)
			}
		}
		tree, conflicted, err := dst.repo.mergeTree(ctx, cur, ch)
		if err != nil {
			return nil, fmt.Errorf("merge branch %s: %w", br, err)
		}
		for _, p := range conflicted {
			conflicts = append(conflicts, engine.MergeConflict{Path: p, Branches: slices.Clone(touched[p])})
		}
		msg := mergeMessage(b.run.ID, node, execution, name, conflicts)
		h, err := dst.repo.writeCommit(tree, []plumbing.Hash{cur, ch}, msg, b.run.m.signature())
		if err != nil {
			return nil, err
		}
		cur = h
	}
	if cur == head {
		return nil, nil
	}
	if err := dst.repo.setRef(dst.refName(), cur, head); err != nil {
		return nil, err
	}
	if err := dst.materialize(cur); err != nil {
		return nil, err
	}
	if dst == b.run {
		b.recordRun(context.WithoutCancel(ctx), "", cur)
	}
	return conflicts, nil
}

func mergeMessage(runID, node string, execution int, branch string, conflicts []engine.MergeConflict) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s: merge branch %s\n\n", node, branch)
	for _, c := range conflicts {
		fmt.Fprintf(&sb, "%s: %s\t%s\n", TrailerConflict, c.Path, strings.Join(c.Branches, ","))
	}
	fmt.Fprintf(&sb, "%s: %s\n%s: %s\n%s: 1\n%s: %d\n%s: none\n", TrailerRun, runID, TrailerNode, node, TrailerAttempt, TrailerExecution, execution, TrailerPersona)
	return sb.String()
}

func conflictsOf(msg string) []engine.MergeConflict {
	var out []engine.MergeConflict
	for _, line := range strings.Split(msg, "\n") {
		rest, ok := strings.CutPrefix(line, TrailerConflict+": ")
		if !ok {
			continue
		}
		p, branches, _ := strings.Cut(rest, "\t")
		out = append(out, engine.MergeConflict{Path: p, Branches: strings.Split(branches, ",")})
	}
	return out
}

// mergeTree is git's three-way merge of two commits (their merge base is
// the fork point), written as a tree without a working tree or index; the
// conflicted paths' files hold conflict markers.
func (r *repo) mergeTree(ctx context.Context, ours, theirs plumbing.Hash) (plumbing.Hash, []string, error) {
	out, err := r.git(ctx, nil, "merge-tree", "--write-tree", "-z", "--name-only", "--no-messages", ours.String(), theirs.String())
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1) {
		return plumbing.ZeroHash, nil, err
	}
	fields := bytes.Split(out, []byte{0})
	if len(fields) == 0 || !plumbing.IsHash(string(fields[0])) {
		return plumbing.ZeroHash, nil, fmt.Errorf("git merge-tree: unexpected output %q", out)
	}
	var conflicted []string
	for _, f := range fields[1:] {
		if len(f) == 0 {
			break
		}
		conflicted = append(conflicted, string(f))
	}
	return plumbing.NewHash(string(fields[0])), conflicted, nil
}
