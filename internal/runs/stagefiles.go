package runs

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// StageFiles are the files of a stage people read on the dashboard: kept
// in the store when replicas share it, since the stage ran on one
// replica's disk and any replica's dashboard may be asked for them.
var StageFiles = []string{"prompt.md", "response.md", "status.json", "output.json"}

// maxKeptFile bounds the copy of one stage file (an agent's response may
// be long; the dashboard shows the start of a longer one).
const maxKeptFile = 4 << 20

// keepStageFiles copies the files of a finished stage (dir, relative to
// the run's logs root) into the store. The stage directory is written by
// agents: files are read without following a link out of the run's
// directory, regular files only.
func (ex *executor) keepStageFiles(ctx context.Context, run Run, dir string) {
	if ex.journals == nil || run.LogsRoot == "" {
		return
	}
	root, err := os.OpenRoot(run.LogsRoot)
	if err != nil {
		ex.log.Warn("keep a stage's files for the dashboard", "run", run.ID, "stage", dir, "err", err)
		return
	}
	defer root.Close()
	for _, name := range StageFiles {
		rel := filepath.Join(dir, name)
		data, err := readRegular(root, rel)
		if err != nil {
			continue // not written: a stage without a prompt (a tool, a gate)
		}
		ex.logErr("keep a stage file for the dashboard", run.ID, ex.journals.PutRunFile(ctx, run.ID, filepath.ToSlash(rel), data))
	}
}

// readRegular reads at most maxKeptFile bytes of the regular file rel
// under root.
func readRegular(root *os.Root, rel string) ([]byte, error) {
	f, err := root.Open(rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", rel)
	}
	return io.ReadAll(io.LimitReader(f, maxKeptFile))
}
