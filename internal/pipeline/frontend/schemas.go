package frontend

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/output"
)

// inlineSchemas puts the text of each output_schema file in place of its
// name, so the prepared graph (what lint checks, what the engine runs and a
// resume re-prepares) carries the schema itself. A name is looked up in
// each of dirs in turn (beside the pipeline, the workspace); it must be a
// relative path that stays inside the directory, and a regular file of at
// most output.MaxSchema bytes. A name found nowhere is left as it is, for
// lint's output_schema rule to report. Each file is read once however many
// nodes name it, and the text it adds counts against
// pipeline.MaxExpandedSize before it is added.
func inlineSchemas(g *pipeline.Graph, dirs []string) (*pipeline.Graph, error) {
	var named []*pipeline.Node
	for _, n := range g.Nodes {
		if v := strings.TrimSpace(n.Attrs["output_schema"]); v != "" && !strings.HasPrefix(v, "{") {
			named = append(named, n)
		}
	}
	if len(named) == 0 {
		return g, nil
	}
	texts := map[string]string{}
	var growth int64
	for _, n := range named {
		name := strings.TrimSpace(n.Attrs["output_schema"])
		text, seen := texts[name]
		if !seen {
			text = readSchema(name, dirs)
			texts[name] = text
		}
		if text != "" {
			growth += int64(len(text) - len(n.Attrs["output_schema"]))
		}
	}
	if size := g.TextSize() + growth; size > pipeline.MaxExpandedSize {
		return nil, &pipeline.ExpansionError{Step: "inlining the output_schema files", Size: size,
			Fix: "share fewer or smaller schema files among the nodes"}
	}
	out := g.Clone()
	for _, n := range out.Nodes {
		name := strings.TrimSpace(n.Attrs["output_schema"])
		if text := texts[name]; text != "" {
			n.Attrs["output_schema"] = text
		}
	}
	return out, nil
}

// readSchema returns the text of the first dir/name that is a readable
// regular file, "" when there is none.
func readSchema(name string, dirs []string) string {
	if !filepath.IsLocal(name) {
		return ""
	}
	for _, dir := range dirs {
		if dir == "" {
			continue
		}
		root, err := os.OpenRoot(dir) // name cannot leave dir, not even through a symbolic link
		if err != nil {
			continue
		}
		text, err := readRegular(root, name)
		root.Close()
		if err == nil {
			return text
		}
	}
	return ""
}

func readRegular(root *os.Root, name string) (string, error) {
	f, err := root.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", errors.New("not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, output.MaxSchema+1))
	if err != nil {
		return "", err
	}
	if len(data) > output.MaxSchema {
		return "", fmt.Errorf("%s is over %d bytes", name, output.MaxSchema)
	}
	return string(data), nil
}
