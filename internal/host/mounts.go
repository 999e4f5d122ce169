package host

import (
	"errors"
	"os"
	"path/filepath"
	"strings"

	"nanohost/internal/config"

	"nanohost/internal/container"
	"nanohost/internal/container/protocol"
	"nanohost/internal/ipc"
)

// groupMounts are what a group's containers see besides the workspace: the
// request queues of the group's IPC directory (tasks/, messages/,
// responses/), nested under the container's own IPC mount at /workspace/ipc
// so `nanoagent ipc` finds them where the IPC protocol says; and skills/
// read-only when the host has one; then the group's configured extra mounts
// (already validated against the mount allowlist) under /workspace/extra.
func (h *Host) groupMounts(folder string) []container.Mount {
	dir := ipc.GroupDir(h.IPCRoot(), folder)
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	var ms []container.Mount
	for _, sub := range []string{string(ipc.QueueTasks), string(ipc.QueueMessages), ipc.DirResponses} {
		ms = append(ms, container.Mount{Source: filepath.Join(abs, sub), Target: protocol.IPCDir + "/" + sub})
	}
	if skills, err := filepath.Abs(filepath.Join(h.root, "skills")); err == nil {
		if st, err := os.Stat(skills); err == nil && st.IsDir() {
			ms = append(ms, container.Mount{Source: skills, Target: "/workspace/skills", ReadOnly: true})
		}
	}
	return append(ms, h.extraMounts[folder]...)
}

// mountRefusal is the error New returns when a group asks for a mount the
// allowlist refuses: the host does not start with a group missing a
// directory it was promised.
func mountRefusal(problems []config.Problem) error {
	var lines []string
	for _, p := range problems {
		if p.Blocking {
			lines = append(lines, p.String())
		}
	}
	if len(lines) == 0 {
		return nil
	}
	return errors.New("host: refusing to start: " + strings.Join(lines, "; "))
}
