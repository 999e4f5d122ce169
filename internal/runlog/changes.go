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
	line := "    ± " + name + " " + c.Describe()
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
