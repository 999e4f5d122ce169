package host

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// workflows finds stored pipelines by name for /pipeline run <name>.
type workflows struct {
	groups *groupTable
	dirs   []string // pipelines.dirs
	root   string   // where the bundled examples/ and skills/ are
}

// find finds <name>.dot: the group's workspace first, then the configured
// pipeline directories, then the bundled examples/ and
// skills/attractor/workflows/.
func (w workflows) find(folder, name string) (string, error) {
	if name == "" || strings.ContainsAny(name, `/\`) || strings.Contains(name, "..") {
		return "", fmt.Errorf("%q is not a pipeline name (use a plain name such as demo)", name)
	}
	file := strings.TrimSuffix(name, ".dot") + ".dot"
	dirs := []string{w.groups.dir(folder)}
	dirs = append(dirs, w.dirs...)
	dirs = append(dirs, filepath.Join(w.root, "examples"), filepath.Join(w.root, "skills", "attractor", "workflows"))
	for _, d := range dirs {
		p := filepath.Join(d, file)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", fmt.Errorf("no pipeline named %s: looked for %s in the group's workspace, %s", name, file, strings.Join(dirs[1:], ", "))
}
