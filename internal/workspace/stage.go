package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// StageID names one execution of a stage: what its commit's trailers say.
type StageID struct {
	Node      string `json:"node"`
	Label     string `json:"label,omitempty"`
	Attempt   int    `json:"attempt"`
	Execution int    `json:"execution"`
	Persona   string `json:"persona,omitempty"`
}

// Trailer keys of a stage commit.
const (
	TrailerRun       = "Nanohost-Run"
	TrailerNode      = "Nanohost-Node"
	TrailerAttempt   = "Nanohost-Attempt"
	TrailerExecution = "Nanohost-Execution"
	TrailerPersona   = "Nanohost-Persona"
)

func (run *Run) message(s StageID) string {
	label := s.Label
	if label == "" {
		label = s.Node
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s\n\n", s.Node, strings.ReplaceAll(label, "\n", " "))
	fmt.Fprintf(&b, "%s: %s\n%s: %s\n%s: %d\n%s: %d\n", TrailerRun, run.ID, TrailerNode, s.Node, TrailerAttempt, s.Attempt, TrailerExecution, s.Execution)
	persona := s.Persona
	if persona == "" {
		persona = "none"
	}
	fmt.Fprintf(&b, "%s: %s\n", TrailerPersona, persona)
	return b.String()
}

// Trailers reads the nanohost trailers of a commit message.
func Trailers(msg string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(msg, "\n") {
		k, v, ok := strings.Cut(line, ": ")
		if ok && strings.HasPrefix(k, "Nanohost-") {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}

// sideRef names where a stage's work that is not on the branch is kept.
func (run *Run) sideRef(kind string, s StageID) plumbing.ReferenceName {
	node := unsafeRefChars.ReplaceAllString(s.Node, "_")
	return plumbing.ReferenceName(fmt.Sprintf("refs/nanohost/%s/%s/%s/%d", kind, ShortID(run.ID), node, s.Execution))
}

// Begin prepares the working tree for a stage: when no other stage of the
// run is working in it, it starts from the branch's last commit — a
// commit of this very execution that the journal never saw (the host died
// after committing) is set aside to be made again, and edits left by an
// interrupted stage are kept on a side ref, never mixed into this one.
func (run *Run) Begin(ctx context.Context, s StageID) error {
	run.mu.Lock()
	defer run.mu.Unlock()
	run.inflight++
	if run.inflight > 1 {
		return nil
	}
	rs, _ := run.loadState()
	head, err := run.Head()
	if err != nil {
		return err
	}
	if c, err := run.repo.commit(head); err == nil && head != run.Base && len(c.ParentHashes) == 1 {
		t := Trailers(c.Message)
		if t[TrailerNode] == s.Node && t[TrailerExecution] == strconv.Itoa(s.Execution) && t[TrailerRun] == run.ID {
			aside := run.sideRef("redone", s)
			if err := run.repo.setRef(aside, head, plumbing.ZeroHash); err == nil {
				if err := run.repo.setRef(run.refName(), c.ParentHashes[0], head); err != nil {
					return err
				}
				run.m.log.Warn("a stage committed before the host stopped runs again; its commit is kept aside", "run", run.ID, "node", s.Node, "ref", aside)
				head = c.ParentHashes[0]
			}
		}
	}
	interrupted := s
	if rs.Stage != nil {
		interrupted = *rs.Stage
	}
	if _, err := run.setAside(head, "interrupted", interrupted); err != nil {
		return err
	}
	return run.saveState(&s)
}

// setAside commits what the tree holds beyond head on a side ref of kind
// and resets the tree to head; nothing when the tree is head.
func (run *Run) setAside(head plumbing.Hash, kind string, s StageID) (plumbing.ReferenceName, error) {
	ix, tree, err := run.snapshot(run.m.opts.Limits)
	var tooLarge *TooLargeError
	if errors.As(err, &tooLarge) {
		// too large to keep: dropped, and the tree starts again from the branch
		run.m.log.Warn("a stage's unfinished edits are too large to keep; the working tree starts again from the branch", "run", run.ID, "node", s.Node, "err", err)
		return "", run.resetTree(head)
	}
	if err != nil {
		return "", err
	}
	c, err := run.repo.commit(head)
	if err != nil {
		return "", err
	}
	if c.TreeHash == tree {
		run.ix = ix
		return "", nil
	}
	h, err := run.repo.writeCommit(tree, []plumbing.Hash{head}, run.message(s), run.m.signature())
	if err != nil {
		return "", err
	}
	ref := run.sideRef(kind, s)
	if old, _ := run.repo.ref(ref); !old.IsZero() {
		ref = plumbing.ReferenceName(fmt.Sprintf("%s-%s", ref, h.String()[:8]))
	}
	if err := run.repo.setRef(ref, h, plumbing.ZeroHash); err != nil {
		return "", err
	}
	run.m.log.Warn("a stage's unfinished edits are kept aside, and the working tree starts again from the branch", "run", run.ID, "node", s.Node, "ref", ref.String())
	run.ix = ix
	return ref, run.materialize(head)
}

// snapshot walks the tree and stores its objects.
func (run *Run) snapshot(lim Limits) (*index, plumbing.Hash, error) {
	ix, err := scan(run.Dir, run.ix, run.repo, lim)
	if err != nil {
		return nil, plumbing.ZeroHash, err
	}
	tree, err := run.repo.writeTree(ix)
	return ix, tree, err
}

// Commit is a stage's commit on the run's branch.
type Commit struct {
	Hash   plumbing.Hash
	Parent plumbing.Hash
	// SideRef is set instead when the stage failed: its edits are kept
	// there and the tree is back at the branch's last commit.
	SideRef plumbing.ReferenceName
}

// Finish ends a stage: kept (it succeeded), what it changed becomes one
// commit on the branch (none when it changed nothing); otherwise its edits
// go to a side ref and the tree goes back to the branch's last commit, so
// a retry starts where the stage started.
func (run *Run) Finish(ctx context.Context, s StageID, kept bool) (Commit, error) {
	run.mu.Lock()
	defer run.mu.Unlock()
	run.inflight--
	head, err := run.Head()
	if err != nil {
		return Commit{}, err
	}
	if !kept {
		if run.inflight > 0 {
			return Commit{}, nil
		}
		ref, err := run.setAside(head, "failed", s)
		if err == nil {
			err = run.saveState(nil)
		}
		return Commit{SideRef: ref}, err
	}
	ix, tree, err := run.snapshot(run.m.opts.Limits)
	var tooLarge *TooLargeError
	if errors.As(err, &tooLarge) && run.inflight == 0 {
		// refused: what was too large is not kept, and the next stage (or
		// the retry) starts from the branch's last commit
		if rerr := run.resetTree(head); rerr != nil {
			return Commit{}, errors.Join(err, rerr)
		}
		if serr := run.saveState(nil); serr != nil {
			return Commit{}, errors.Join(err, serr)
		}
	}
	if err != nil {
		return Commit{}, err
	}
	c, err := run.repo.commit(head)
	if err != nil {
		return Commit{}, err
	}
	out := Commit{Parent: head}
	if c.TreeHash != tree {
		h, err := run.repo.writeCommit(tree, []plumbing.Hash{head}, run.message(s), run.m.signature())
		if err != nil {
			return Commit{}, err
		}
		if err := run.repo.setRef(run.refName(), h, head); err != nil {
			return Commit{}, err
		}
		out.Hash = h
	}
	run.ix = ix
	if err := saveIndex(filepath.Join(run.stateDir, "index"), ix); err != nil {
		return out, err
	}
	if run.inflight == 0 {
		err = run.saveState(nil)
	}
	return out, err
}

// Commits lists the branch's commits since the base, oldest first.
func (run *Run) Commits() ([]*object.Commit, error) {
	head, err := run.Head()
	if err != nil {
		return nil, err
	}
	var out []*object.Commit
	for h := head; h != run.Base && !h.IsZero(); {
		c, err := run.repo.commit(h)
		if err != nil {
			return nil, err
		}
		out = append([]*object.Commit{c}, out...)
		if len(c.ParentHashes) == 0 {
			break
		}
		h = c.ParentHashes[0]
	}
	return out, nil
}

// resetTree replaces the working tree with a fresh checkout of head,
// reading nothing of what is there (it may be too large to read).
func (run *Run) resetTree(head plumbing.Hash) error {
	if err := os.RemoveAll(run.Dir); err != nil {
		return err
	}
	run.ix = nil
	return run.materialize(head)
}
