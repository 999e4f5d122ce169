package lint

import (
	"path/filepath"
	"strings"

	"nanohost/internal/pipeline"
)

// IsSubPipeline reports whether n runs another pipeline as a child:
// type="pipeline", or a manager loop (house) naming its child with
// pipeline="…".
func IsSubPipeline(n *pipeline.Node) bool {
	switch n.HandlerType() {
	case "pipeline":
		return true
	case "stack.manager_loop":
		return strings.TrimSpace(n.Attrs["pipeline"]) != ""
	}
	return false
}

// subPipeline checks what the graph alone tells of its sub-pipeline nodes
// (docs/semantics.md, "Sub-pipelines"): each names its pipeline, as a name
// or a path inside the pipeline's directory; its inputs="key=${…},…" parse;
// a manager's stack.child_workdir stays inside the workspace. That the child
// exists, validates, gets its required inputs and calls no pipeline that
// calls it back is the front end's part (it reads the files).
func subPipeline(g *pipeline.Graph) []pipeline.Diagnostic {
	var out []pipeline.Diagnostic
	for _, n := range g.Nodes {
		if dir := strings.TrimSpace(n.Attrs["stack.child_workdir"]); dir != "" && !localDir(dir) {
			out = append(out, nodeDiag("sub_pipeline", pipeline.SeverityError, n, `give a directory inside the workspace, relative to it: stack.child_workdir="services/api"`,
				"%s's stack.child_workdir %q leaves the workspace", n.ID, dir))
		}
		if !IsSubPipeline(n) {
			if _, has := n.Attrs["inputs"]; has {
				out = append(out, nodeDiag("sub_pipeline", pipeline.SeverityWarning, n, `move inputs to a node with type="pipeline", or to the graph to declare the inputs this pipeline needs`,
					"%s has inputs=…, but runs no sub-pipeline: they go nowhere", n.ID))
			}
			continue
		}
		name := strings.TrimSpace(n.Attrs["pipeline"])
		switch {
		case name == "":
			out = append(out, nodeDiag("sub_pipeline", pipeline.SeverityError, n, `name the pipeline to run: pipeline="triage"`,
				"sub-pipeline node %s names no pipeline", n.ID))
		case !strings.Contains(name, "${") && !localDir(name):
			out = append(out, nodeDiag("sub_pipeline", pipeline.SeverityError, n, `name a stored pipeline (pipeline="triage") or a path beside this one`,
				"%s's pipeline %q leaves the pipeline's directory", n.ID, name))
		}
		if _, err := pipeline.ParseInputs(n.Attrs["inputs"]); err != nil {
			out = append(out, nodeDiag("sub_pipeline", pipeline.SeverityError, n, `write inputs="key=${node.field},other=text"`,
				"%s's inputs: %v", n.ID, err))
		}
	}
	return out
}

// localDir reports whether p is a relative path that stays inside its base.
func localDir(p string) bool {
	return filepath.IsLocal(filepath.Clean(filepath.FromSlash(p)))
}
