package workspace

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"nanohost/internal/pipeline/engine"
)

// SummaryFile, in a run's directory, says where the run's work is: what
// `runs show` and the surfaces print when the run ends.
const SummaryFile = "workspace.json"

// Summary is a run's branch as it stands after its last commit.
type Summary struct {
	Branch string `json:"branch"`
	Base   string `json:"base"`
	// BaseBranch is the branch of the group's repository the run started
	// from ("" for a folder's snapshot).
	BaseBranch string `json:"base_branch,omitempty"`
	Head       string `json:"head"`
	Commits    int    `json:"commits"` // on the branch since the base (first parents)
	// Repository is the git directory holding the branch.
	Repository string `json:"repository"`
	// Trees are the run's working trees (removed by the retention sweep).
	Trees []string `json:"trees,omitempty"`
	engine.ChangeCounts
	// Delivery is what became of the branch when the run succeeded:
	// pushed, a pull request opened, the group's folder fast-forwarded.
	Delivery *Delivery `json:"delivery,omitempty"`
}

// ReadSummary reads a run's summary from its directory in fsys (an
// os.Root's: no name leads out of it).
func ReadSummary(fsys fs.FS) (Summary, error) {
	var s Summary
	data, err := fs.ReadFile(fsys, SummaryFile)
	if err == nil {
		err = json.Unmarshal(data, &s)
	}
	return s, err
}

// writeSummary records the run's branch in its directory, with the
// diffstat of the base to its head.
func (run *Run) writeSummary(runDir string, list []Change) error {
	if runDir == "" {
		return nil
	}
	head, err := run.Head()
	if err != nil {
		return err
	}
	commits, err := run.Commits()
	if err != nil {
		return err
	}
	s := Summary{Branch: run.Branch, Base: run.Base.String(), BaseBranch: run.baseBranch, Head: head.String(), Commits: len(commits),
		Repository: run.repo.gitDir, Trees: []string{run.Dir}, ChangeCounts: CountChanges(list)}
	run.bmu.Lock()
	for _, b := range run.branches {
		s.Trees = append(s.Trees, b.Dir)
	}
	run.bmu.Unlock()
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(runDir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return writeAtomic(filepath.Join(runDir, SummaryFile), data)
}

// RecordStart writes the summary of a run that has none yet in its
// directory runDir: its branch at its base, before any commit, so the
// thread, the dashboard and `runs show` name the base from the start. A
// resumed run's summary is left as its last commit wrote it.
func (run *Run) RecordStart(runDir string) {
	if runDir == "" {
		return
	}
	if _, err := os.Lstat(filepath.Join(runDir, SummaryFile)); !errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err := run.writeSummary(runDir, nil); err != nil {
		run.m.log.Warn("the run's branch summary was not written", "run", run.ID, "err", err)
	}
}

// Prune deletes a finished run's branch, its side refs and parallel
// branches' refs, and its working trees if they are still there. The
// objects stay until the repository's own garbage collection. It returns
// the refs it deleted.
func Prune(s Summary, runID string) ([]string, error) {
	if _, err := os.Stat(filepath.Join(s.Repository, "HEAD")); err != nil {
		return nil, fmt.Errorf("the run's repository %s: %w", s.Repository, err)
	}
	r, err := openRepo(s.Repository)
	if err != nil {
		return nil, err
	}
	short := ShortID(runID)
	all, err := r.refs("refs/")
	if err != nil {
		return nil, err
	}
	var deleted []string
	for name := range all {
		n := name.String()
		mine := n == "refs/heads/"+s.Branch ||
			(strings.HasPrefix(n, "refs/nanohost/") && strings.Contains(n+"/", "/"+short+"/"))
		if !mine {
			continue
		}
		if err := r.removeRef(name); err != nil {
			return deleted, err
		}
		deleted = append(deleted, n)
	}
	slices.Sort(deleted)
	for _, t := range s.Trees {
		if filepath.Base(t) == short || strings.HasPrefix(filepath.Base(t), short+"--") {
			os.RemoveAll(t)
		}
	}
	return deleted, nil
}

// ErrNoSummary: the run has no summary (no commit yet).
var ErrNoSummary = errors.New("the run has no branch summary yet")

// ReadSummaryAt reads the summary in the run's directory runDir.
func ReadSummaryAt(runDir string) (Summary, error) {
	root, err := os.OpenRoot(runDir)
	if err != nil {
		return Summary{}, err
	}
	defer root.Close()
	s, err := ReadSummary(root.FS())
	if errors.Is(err, fs.ErrNotExist) {
		err = ErrNoSummary
	}
	return s, err
}
