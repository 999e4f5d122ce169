package runlog

import (
	"fmt"
	"strings"

	"nanohost/internal/pipeline/engine"
)

// maxEventPaths bounds the paths a WorkspaceChanged line names.
const maxEventPaths = 3

// changesLine is a WorkspaceChanged event's line: the summary, the
// first paths, and the stages that overlapped.
func changesLine(name, branch string, c *engine.WorkspaceChanges) string {
	if c == nil {
		return ""
	}
	if c.Error != "" {
		return "    ± " + name + ": workspace changes not recorded (" + c.Error + ")" + branch
	}
	line := "    ± " + name + " " + ChangesDone(c)
	if len(c.Paths) > 0 {
		shown := c.Paths[:min(len(c.Paths), maxEventPaths)]
		line += ": " + strings.Join(shown, ", ")
		if c.Files > len(shown) {
			line += fmt.Sprintf(" and %d more", c.Files-len(shown))
		}
	}
	if len(c.Overlapped) > 0 {
		names := make([]string, len(c.Overlapped))
		for i, s := range c.Overlapped {
			names[i] = s.NodeID
		}
		line += " (ran alongside " + strings.Join(names, ", ") + "; changes made by either are included)"
	}
	return line + branch
}

// ChangeCounts reads "3 files (+40 −7)".
func ChangeCounts(c engine.ChangeCounts) string {
	noun := "files"
	if c.Files == 1 {
		noun = "file"
	}
	return fmt.Sprintf("%d %s (+%d −%d)", c.Files, noun, c.LinesAdded, c.LinesDeleted)
}

// ChangesDone is what a stage visit changed, as people read it: "changed 3
// files (+40 −7)", "changed no files", or why it was not recorded.
func ChangesDone(c *engine.WorkspaceChanges) string {
	switch {
	case c == nil:
		return ""
	case c.Error != "":
		return "changes not recorded: " + c.Error
	case c.Files == 0:
		return "changed no files"
	}
	return "changed " + ChangeCounts(c.ChangeCounts)
}
