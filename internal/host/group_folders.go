package host

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"nanohost/internal/container"
	"nanohost/internal/ipc"
	"nanohost/internal/store"
)

// groupFolders owns the groups' directories on disk: each group's
// workspace, data/groups/<folder>/ with its memory file CLAUDE.md, and its
// IPC queues, data/ipc/<folder>/.
type groupFolders struct {
	dataDir string // data/
	ipcRoot string // data/ipc
}

// dir is data/groups/<folder>, the group's workspace.
func (f groupFolders) dir(folder string) string { return filepath.Join(f.dataDir, "groups", folder) }

// ipcDir is data/ipc/<folder>, the group's IPC queues.
func (f groupFolders) ipcDir(folder string) string { return ipc.GroupDir(f.ipcRoot, folder) }

// prepare creates g's workspace with its memory file (kept when it
// exists) and its IPC queues, each usable by the group's agents.
func (f groupFolders) prepare(g store.Group) error {
	dir := f.dir(g.Folder)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create workspace of group %s: %w", g.Folder, err)
	}
	memory := filepath.Join(dir, "CLAUDE.md")
	if _, err := os.Stat(memory); errors.Is(err, os.ErrNotExist) {
		text := fmt.Sprintf("# %s\n\nThis is the memory of the %q group. Agents read it at the start of every conversation;\n"+
			"write down what should be remembered across conversations.\n", g.Name, g.Folder)
		if err := os.WriteFile(memory, []byte(text), 0o644); err != nil {
			return fmt.Errorf("create memory of group %s: %w", g.Folder, err)
		}
	}
	if err := handToAgents(dir, memory); err != nil {
		return fmt.Errorf("give the workspace of group %s to its agents: %w", g.Folder, err)
	}
	// The IPC directories stay owned by this process's user: agents run
	// as the workspace owner (see container.resolveUser), who is us unless
	// the host runs as root — then the directories are opened up.
	uid, gid := -1, -1
	if os.Geteuid() == 0 {
		uid, gid = container.DefaultAgentUID, container.DefaultAgentGID
	}
	return ipc.EnsureGroup(f.ipcRoot, g.Folder, uid, gid)
}

// handToAgents lets agents work in a workspace a root host created. Agents
// run as the workspace owner (container.resolveUser), or as the default
// agent user when root owns it — who could then not write a single file. So
// a root host gives a root-owned workspace (and its memory file) to the
// default agent user; a workspace someone else owns is left alone.
func handToAgents(paths ...string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	for _, p := range paths {
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if sys, ok := st.Sys().(*syscall.Stat_t); !ok || sys.Uid != 0 || st.Mode()&os.ModeSymlink != 0 {
			continue
		}
		if err := os.Lchown(p, container.DefaultAgentUID, container.DefaultAgentGID); err != nil {
			return err
		}
	}
	return nil
}
