package workspace

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"nanohost/internal/changes"
	"nanohost/internal/pipeline/engine"
)

// SummaryFile, in a run's directory, says where the run's work is: what
// `runs show` and the surfaces print when the run ends.
const SummaryFile = "workspace.json"

// Summary is a run's branch as it stands after its last commit.
type Summary struct {
	Branch  string `json:"branch"`
	Base    string `json:"base"`
	Head    string `json:"head"`
	Commits int    `json:"commits"` // on the branch since the base (first parents)
	// Repository is the git directory holding the branch.
	Repository string `json:"repository"`
	engine.ChangeCounts
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
func (run *Run) writeSummary(runDir string, list []changes.Change) error {
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
	s := Summary{Branch: run.Branch, Base: run.Base.String(), Head: head.String(), Commits: len(commits),
		Repository: run.repo.gitDir, ChangeCounts: changes.Summary(list)}
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(runDir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return writeAtomic(filepath.Join(runDir, SummaryFile), data)
}
