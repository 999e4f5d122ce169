//go:build !lean

package main

// `nanohost runs show RUN --changes [NODE]`: what a run's stages changed in
// the workspace, from the change records in its logs directory.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"golang.org/x/sys/unix"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runlog"
	"nanohost/internal/runs"
	"nanohost/internal/store"
	gitws "nanohost/internal/workspace"
)

// changesView is `runs show --changes --json`.
type changesView struct {
	RunID   string              `json:"run_id"`
	NodeID  string              `json:"node_id,omitempty"`
	Visit   int                 `json:"visit,omitempty"`
	Summary engine.ChangeCounts `json:"summary"`
	Changes []gitws.Change      `json:"changes"`
	// Stages lists, for the run's record, what each stage visit changed.
	Stages []stageChanges `json:"stages,omitempty"`
	Diff   string         `json:"diff"`
}

// stageChanges is a WorkspaceChanged event of the run.
type stageChanges struct {
	NodeID  string                   `json:"node_id"`
	Visit   int                      `json:"visit"`
	Changes *engine.WorkspaceChanges `json:"changes"`
}

func showChanges(ctx context.Context, w io.Writer, st *store.Store, id, node string) error {
	run, err := getRun(ctx, st, id)
	if err != nil {
		return err
	}
	id = run.ID
	if run.LogsRoot == "" {
		return exitCode(exitRunsFailed, fmt.Errorf("run %s has no logs directory recorded", id))
	}
	root, err := os.OpenRoot(run.LogsRoot)
	if err != nil {
		return exitCode(exitRunsFailed, fmt.Errorf("open run %s's logs directory: %w (is this the host's machine?)", id, err))
	}
	defer root.Close()
	view := changesView{RunID: id, NodeID: node}
	dir := gitws.RunDir
	if node != "" {
		dir = stageDir(run, node)
		if v := runsFlags.visit; v > 0 {
			dir, view.Visit = path.Join(dir, gitws.VisitDir(v)), v
		}
	}
	set, err := gitws.ReadSet(root.FS(), dir, true)
	if errors.Is(err, gitws.ErrNoRecord) {
		return exitCode(exitRunsFailed, noRecordError(run, node))
	}
	if err != nil {
		return exitCode(exitRunsFailed, err)
	}
	if view.Visit == 0 {
		view.Visit = set.Visit
	}
	view.Summary, view.Changes, view.Diff = gitws.CountChanges(set.Changes), set.Changes, string(set.Diff)
	if node == "" {
		events, err := st.Events(ctx, id, 0, 0)
		if err != nil {
			return exitCode(exitRunsFailed, err)
		}
		view.Stages = stagesChanged(events)
	}
	if runsFlags.json {
		return encodeJSON(w, view)
	}
	writeChanges(w, view, useColor(w))
	if node != "" {
		if earlier := gitws.EarlierVisits(root.FS(), stageDir(run, node)); len(earlier) > 0 && runsFlags.visit == 0 {
			fmt.Fprintf(w, "\n(earlier visits of %s have records too: --visit %s)\n", node, joinInts(earlier))
		}
	}
	return nil
}

func noRecordError(run runs.Run, node string) error {
	if node == "" {
		return fmt.Errorf("no stage of run %s recorded a change in the workspace (stages that change nothing leave only their own record: runs show %s --changes NODE)", run.ID, run.ID)
	}
	if runsFlags.visit > 0 {
		return fmt.Errorf("node %s of run %s has no record of visit %d (records of earlier visits are kept once the node runs again)", node, run.ID, runsFlags.visit)
	}
	return fmt.Errorf("node %s of run %s has no change record: it is not an agent or tool stage, has not finished, or is not a node of the run", node, run.ID)
}

// stageDir is the node's directory under the run's stage root (restart-N
// after a loop restart), relative to the logs root.
func stageDir(run runs.Run, node string) string {
	if cp, err := engine.LoadCheckpoint(run.LogsRoot); err == nil && cp.StageRoot != "" && filepath.IsLocal(cp.StageRoot) {
		return path.Join(filepath.ToSlash(cp.StageRoot), node)
	}
	return node
}

// stagesChanged lists the WorkspaceChanged events with the visit each is of.
func stagesChanged(events []engine.Event) []stageChanges {
	visits := map[string]int{}
	var out []stageChanges
	for _, e := range events {
		switch e.Type {
		case engine.EventStageStarted:
			visits[e.NodeID]++
		case engine.EventWorkspaceChanged:
			out = append(out, stageChanges{NodeID: e.NodeID, Visit: visits[e.NodeID], Changes: e.Changes})
		}
	}
	return out
}

var changeMarks = map[string]string{gitws.Added: "A", gitws.Modified: "M", gitws.Deleted: "D"}

// writeChanges prints a change record: the summary, the files, which stage
// changed what (a run's record), and the diff, coloured on a terminal.
func writeChanges(w io.Writer, v changesView, color bool) {
	title := "Changes since the run started"
	if v.NodeID != "" {
		title = "Changes of " + v.NodeID
		if v.Visit > 0 {
			title += fmt.Sprintf(" (visit %d)", v.Visit)
		}
	}
	fmt.Fprintf(w, "%s: %s\n", runlog.Visible(title), runlog.ChangeCounts(v.Summary))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range v.Changes {
		note := fmt.Sprintf("+%d −%d", c.LinesAdded, c.LinesDeleted)
		switch {
		case c.Binary:
			note = "binary"
		case c.NoDiff != "":
			note = c.NoDiff
		}
		name := c.Path
		if c.Kind == "symlink" {
			name += " -> " + c.Target
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d B\n", changeMarks[c.Change], clip(name, 80), runlog.Visible(note), c.Bytes)
	}
	tw.Flush()
	if len(v.Stages) > 0 {
		fmt.Fprintln(w, "\nBy stage")
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, s := range v.Stages {
			fmt.Fprintf(tw, "  %s\tvisit %d\t%s\n", runlog.Visible(s.NodeID), s.Visit, runlog.Visible(runlog.ChangesDone(s.Changes)))
		}
		tw.Flush()
	}
	if v.Diff == "" {
		return
	}
	fmt.Fprintln(w)
	for _, line := range strings.SplitAfter(v.Diff, "\n") {
		io.WriteString(w, colorLine(runlog.Visible(line), color))
	}
}

// colorLine colours a diff line the way git does on a terminal.
func colorLine(line string, color bool) string {
	if !color || line == "" {
		return line
	}
	body := strings.TrimSuffix(line, "\n")
	code := ""
	switch {
	case strings.HasPrefix(body, "diff --git "), strings.HasPrefix(body, "--- "), strings.HasPrefix(body, "+++ "),
		strings.HasPrefix(body, "new file mode"), strings.HasPrefix(body, "deleted file mode"):
		code = "1"
	case strings.HasPrefix(body, "@@"):
		code = "36"
	case strings.HasPrefix(body, "+"):
		code = "32"
	case strings.HasPrefix(body, "-"):
		code = "31"
	}
	if code == "" {
		return line
	}
	return "\x1b[" + code + "m" + body + "\x1b[0m" + line[len(body):]
}

// useColor: a terminal, and NO_COLOR unset.
func useColor(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("NO_COLOR") != "" {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ", ")
}
