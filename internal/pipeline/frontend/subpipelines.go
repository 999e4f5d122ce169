package frontend

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/lint"
)

// maxChildSource bounds a sub-pipeline's file read while validating.
const maxChildSource = 4 << 20

// children validates the sub-pipelines a pipeline calls, once each however
// often they are named, for one Prepare and every child it reaches.
type children struct {
	chain []string             // the files being validated, outermost first
	done  map[string]childInfo // the files validated, by absolute path
}

type childInfo struct {
	required []string
	problem  string // the child's first error ("" when it validates)
}

// checkSubPipelines finds the pipeline each sub-pipeline node names (a name
// known only when the stage starts, ${…}, is left to the engine), writes
// where it was found into the node (so the engine runs the file validated
// here), and reports one that is found nowhere, does not validate, is not
// given its required inputs, or calls back a pipeline that calls it — a
// cycle (rule sub_pipeline).
func checkSubPipelines(g *pipeline.Graph, file string, opts Options, ch *children) []pipeline.Diagnostic {
	var out []pipeline.Diagnostic
	dirs := opts.PipelineDirs
	if len(dirs) == 0 && file != "" && file != "-" {
		dirs = []string{filepath.Dir(file)}
	}
	diag := func(n *pipeline.Node, fix, format string, args ...any) {
		out = append(out, pipeline.Diagnostic{Rule: "sub_pipeline", Severity: pipeline.SeverityError, File: file, NodeID: n.ID,
			Line: n.Pos.Line, Column: n.Pos.Column, Fix: fix, Message: fmt.Sprintf(format, args...)})
	}
	for _, n := range g.Nodes {
		name := strings.TrimSpace(n.Attrs["pipeline"])
		if !lint.IsSubPipeline(n) || name == "" || strings.Contains(name, "${") || filepath.IsAbs(name) {
			continue
		}
		path, ok := findPipeline(name, dirs)
		if !ok {
			diag(n, "store the pipeline beside this one or among the group's pipelines, or fix the name",
				"%s runs pipeline %q, which is found nowhere (looked in %s)", n.ID, name, strings.Join(dirs, ", "))
			continue
		}
		n.Attrs["pipeline"] = path
		if i := slices.Index(ch.chain, path); i >= 0 {
			cycle := append(slices.Clone(ch.chain[i:]), path)
			for k := range cycle {
				cycle[k] = filepath.Base(cycle[k])
			}
			diag(n, "break the cycle: a pipeline may not run itself, directly or through others",
				"%s runs %s, which is already running above it: a sub-pipeline cycle %s", n.ID, filepath.Base(path), strings.Join(cycle, " → "))
			continue
		}
		info, seen := ch.done[path]
		if !seen {
			info = ch.validate(path, opts)
			ch.done[path] = info
		}
		if info.problem != "" {
			diag(n, "fix the child pipeline", "%s runs %s, which does not validate: %s", n.ID, filepath.Base(path), info.problem)
			continue
		}
		given, _ := pipeline.ParseInputs(n.Attrs["inputs"]) // lint reports a bad list
		var missing []string
		for _, k := range info.required {
			if !slices.ContainsFunc(given, func(in pipeline.Input) bool { return in.Key == k }) {
				missing = append(missing, k)
			}
		}
		if len(missing) > 0 {
			diag(n, fmt.Sprintf(`give them: inputs="%s=${…}"`, missing[0]),
				"%s runs %s without the input%s it requires: %s", n.ID, filepath.Base(path), plural(len(missing)), strings.Join(missing, ", "))
		}
	}
	return out
}

// validate prepares the child at path (its own children included).
func (ch *children) validate(path string, opts Options) childInfo {
	src, err := readChild(path)
	if err != nil {
		return childInfo{problem: err.Error()}
	}
	dir := filepath.Dir(path)
	child := opts
	child.Goal = ""
	child.PipelineDirs = append([]string{dir}, without(opts.PipelineDirs, dir)...)
	child.SchemaDirs = append([]string{dir}, without(opts.SchemaDirs, dir)...)
	ch.chain = append(ch.chain, path)
	g, diags, err := prepareChildren(path, src, child, ch)
	ch.chain = ch.chain[:len(ch.chain)-1]
	for _, d := range diags {
		if d.Severity == pipeline.SeverityError {
			return childInfo{problem: d.String()}
		}
	}
	if err != nil {
		return childInfo{problem: err.Error()}
	}
	return childInfo{required: g.RequiredInputs()}
}

// findPipeline looks name up in dirs, first to last (name.dot for a name
// without an extension); it never leaves a directory, not even through a
// symbolic link. The path found is absolute.
func findPipeline(name string, dirs []string) (string, bool) {
	cand := filepath.FromSlash(name)
	if filepath.Ext(cand) == "" {
		cand += ".dot"
	}
	if !filepath.IsLocal(cand) {
		return "", false
	}
	for _, dir := range dirs {
		root, err := os.OpenRoot(dir)
		if err != nil {
			continue
		}
		fi, err := root.Stat(cand)
		root.Close()
		if err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if abs, err := filepath.Abs(filepath.Join(dir, cand)); err == nil {
			return abs, true
		}
	}
	return "", false
}

func readChild(path string) ([]byte, error) {
	root, err := os.OpenRoot(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := root.Open(filepath.Base(path))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	switch {
	case err != nil:
		return nil, err
	case fi.Size() > maxChildSource:
		return nil, fmt.Errorf("%s is %d bytes; a pipeline may be at most %d", filepath.Base(path), fi.Size(), maxChildSource)
	}
	data := make([]byte, fi.Size())
	if _, err := f.ReadAt(data, 0); err != nil && fi.Size() > 0 {
		return nil, err
	}
	return data, nil
}

func without(list []string, s string) []string {
	return slices.DeleteFunc(slices.Clone(list), func(x string) bool { return filepath.Clean(x) == s })
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
