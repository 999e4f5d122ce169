package host

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"nanohost/internal/pipeline/lint/didyoumean"
)

// workflows finds stored pipelines by name for /pipeline run <name>.
type workflows struct {
	folders groupFolders
	dirs    []string // pipelines.dirs
	root    string   // where the bundled examples/ and skills/ are
}

// searched are the directories a group's stored pipelines are looked up
// in, first to last: the group's workspace, the configured pipeline
// directories, then the bundled examples/ and skills/attractor/workflows/.
func (w workflows) searched(folder string) []string {
	dirs := []string{w.folders.dir(folder)}
	dirs = append(dirs, w.dirs...)
	return append(dirs, filepath.Join(w.root, "examples"), filepath.Join(w.root, "skills", "attractor", "workflows"))
}

// find finds <name>.dot in the first directory of searched that has it.
// A name that is none of them gets the closest one as a suggestion.
func (w workflows) find(folder, name string) (string, error) {
	if name == "" || strings.ContainsAny(name, `/\`) || strings.Contains(name, "..") {
		return "", fmt.Errorf("%q is not a pipeline name (use a plain name such as demo)", name)
	}
	file := strings.TrimSuffix(name, ".dot") + ".dot"
	dirs := w.searched(folder)
	for _, d := range dirs {
		p := filepath.Join(d, file)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, nil
		}
	}
	if guess := didyoumean.Closest(strings.TrimSuffix(name, ".dot"), w.list(folder)); guess != "" {
		return "", fmt.Errorf("no pipeline named %s — did you mean %s? (/pipeline list shows the stored pipelines)", name, guess)
	}
	return "", fmt.Errorf("no pipeline named %s: looked for %s in the group's workspace, %s (/pipeline list shows the stored pipelines)",
		name, file, strings.Join(dirs[1:], ", "))
}

// list names the stored pipelines a group can run, sorted: every *.dot in
// the searched directories (a name found twice is the first one's).
func (w workflows) list(folder string) []string {
	var names []string
	for _, d := range w.searched(folder) {
		entries, err := os.ReadDir(d)
		if err != nil {
			continue // a directory that does not exist holds no pipelines
		}
		for _, e := range entries {
			name, ok := strings.CutSuffix(e.Name(), ".dot")
			if ok && name != "" && e.Type().IsRegular() && !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	slices.Sort(names)
	return names
}

// read finds and reads the named pipeline: its file name and source.
func (w workflows) read(folder, name string) (file string, src []byte, err error) {
	path, err := w.find(folder, name)
	if err != nil {
		return "", nil, err
	}
	if src, err = os.ReadFile(path); err != nil {
		return "", nil, fmt.Errorf("read pipeline %s: %w", path, err)
	}
	return filepath.Base(path), src, nil
}

// origin says where a stored pipeline of the group was found, for people:
// "workspace", "examples", "skills", or the configured directory.
func (w workflows) origin(folder, path string) string {
	dir := filepath.Dir(path)
	switch dir {
	case filepath.Clean(w.folders.dir(folder)):
		return "workspace"
	case filepath.Join(w.root, "examples"):
		return "examples"
	case filepath.Join(w.root, "skills", "attractor", "workflows"):
		return "skills"
	}
	return dir
}
