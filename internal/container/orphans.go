package container

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// LoadHostID returns the id of the host that owns dataDir, creating it on
// first use. Containers are labelled with it, so a restarted host finds the
// ones its previous instance left behind, and never touches another data
// directory's containers.
func LoadHostID(dataDir string) (string, error) {
	path := filepath.Join(dataDir, "host-id")
	data, err := os.ReadFile(path)
	if err == nil {
		if id := strings.TrimSpace(string(data)); id != "" {
			return id, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read host id: %w", err)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", fmt.Errorf("create data directory: %w", err)
	}
	var b [8]byte
	rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	if err := os.WriteFile(path, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write host id: %w", err)
	}
	return id, nil
}

// currentOwner identifies this process: pid and start time (so a recycled
// pid is not mistaken for us).
func currentOwner() string {
	return strconv.Itoa(os.Getpid()) + "." + processStart(os.Getpid())
}

// processStart is the process's start time in clock ticks since boot
// (field 22 of /proc/<pid>/stat), or "" when unknown.
func processStart(pid int) string {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	// The command name (field 2) may contain spaces: skip past its ')'.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	fields := strings.Fields(s[i+1:])
	const startField = 22 - 3 // fields after ')' start at field 3
	if len(fields) <= startField {
		return ""
	}
	return fields[startField]
}

// ownerAlive reports whether the process an owner label names still runs.
func ownerAlive(owner string) bool {
	pidStr, start, ok := strings.Cut(owner, ".")
	pid, err := strconv.Atoi(pidStr)
	if !ok || err != nil || pid <= 0 {
		return false
	}
	cur := processStart(pid)
	return cur != "" && cur == start
}

// CleanupOrphans removes the containers that a dead instance of this host
// left behind: managed containers with this host id whose owner process is
// gone. Containers of live nanohost processes sharing the data directory
// (another `nanohost pipeline run`) are left alone. It returns how many it
// removed.
func CleanupOrphans(ctx context.Context, rt Runtime, hostID string) (int, error) {
	n, err := cleanupOrphans(ctx, rt, hostID, nil)
	return n, err
}

// cleanupOrphans is CleanupOrphans, calling removed (when set) with each
// container it removed.
func cleanupOrphans(ctx context.Context, rt Runtime, hostID string, removedOne func(name, run string)) (int, error) {
	list, err := rt.List(ctx, map[string]string{LabelManaged: "true", LabelHost: hostID})
	if err != nil {
		return 0, fmt.Errorf("find orphaned containers: %w", err)
	}
	me := currentOwner()
	removed := 0
	var errs []error
	for _, c := range list {
		owner := c.Labels[LabelOwner]
		if owner == me || ownerAlive(owner) {
			continue
		}
		if err := rt.Remove(ctx, c.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		if removedOne != nil {
			removedOne(c.Name, c.Labels[LabelRun])
		}
		removed++
	}
	return removed, errors.Join(errs...)
}

// CleanupOrphans removes what a previous instance of this host left behind
// (containers and their IPC directories) and session records of runs
// untouched for 30 days. Call it once at startup.
func (b *Backend) CleanupOrphans(ctx context.Context) (int, error) {
	// An orphan's IPC directory goes with it, however young: its owner
	// is dead (a killed `pipeline run`), and its resume may start at once.
	n, err := cleanupOrphans(ctx, b.cfg.Runtime, b.cfg.HostID, func(name, run string) {
		if isRemote(b.cfg.Runtime) || name == "" {
			return
		}
		dir := filepath.Join(b.cfg.StateDir, "ipc", safeName(run), name)
		os.RemoveAll(dir)
		os.Remove(filepath.Dir(dir)) // the run's directory, once empty
	})
	if n > 0 {
		b.log.Info("removed containers left by a previous host instance", "count", n)
	}
	if err == nil {
		err = b.cleanupIPCDirs(ctx)
	}
	b.pruneThreadSessions()
	return n, err
}

// cleanupIPCDirs removes IPC directories whose container no longer exists.
// Young directories are spared: another process sharing the state
// directory may be about to start their container.
func (b *Backend) cleanupIPCDirs(ctx context.Context) error {
	list, err := b.cfg.Runtime.List(ctx, map[string]string{LabelManaged: "true", LabelHost: b.cfg.HostID})
	if err != nil {
		return err
	}
	live := map[string]bool{}
	for _, c := range list {
		live[c.Name] = true
	}
	dirs, _ := filepath.Glob(filepath.Join(b.cfg.StateDir, "ipc", "*", "*"))
	for _, d := range dirs {
		st, err := os.Stat(d)
		if err != nil || live[filepath.Base(d)] || time.Since(st.ModTime()) < time.Minute {
			continue
		}
		os.RemoveAll(d)
		os.Remove(filepath.Dir(d)) // the run's directory, once empty
	}
	return nil
}
