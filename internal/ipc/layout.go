package ipc

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Queue is a directory agents drop requests into.
type Queue string

const (
	QueueTasks    Queue = "tasks"
	QueueMessages Queue = "messages"
)

// Queues lists the directories the watcher takes requests from.
var Queues = []Queue{QueueTasks, QueueMessages}

// Names of the other per-group directories.
const (
	DirResponses = "responses"
	DirInput     = "input"
	DirOutcome   = "outcome"
)

// Host-private directories directly under the IPC root. They are not inside
// any group's directory, so no agent can see or tamper with them.
const (
	dirErrors     = "errors"      // quarantined files, errors/<group>/<file> + .reason
	dirProcessing = ".processing" // claimed files, .processing/<group>/<queue>/<file>
	dirState      = ".state"      // the processed-request log
)

// groupDirs are created for every group by EnsureGroup.
var groupDirs = []string{string(QueueTasks), string(QueueMessages), DirResponses, DirInput, DirOutcome}

var safeName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

// ValidGroupName reports why folder cannot be a group directory name, or nil.
// Group names are directory names on the host, so only a plain, short name
// with no dots or separators is accepted; "errors" is reserved for quarantine.
func ValidGroupName(folder string) error {
	if !safeName.MatchString(folder) {
		return fmt.Errorf("group name %q is not allowed: use 1-64 letters, digits, '-' or '_', starting with a letter or digit", folder)
	}
	if folder == dirErrors {
		return fmt.Errorf("group name %q is reserved for quarantined IPC files", folder)
	}
	return nil
}

var requestIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// ValidRequestID reports why id cannot be a request id, or nil. Request ids
// name response files, so they are restricted like file names.
func ValidRequestID(id string) error {
	if id == "" {
		return errors.New("request_id is required (any unique string of letters, digits, '.', '-' or '_')")
	}
	if !requestIDPattern.MatchString(id) || strings.Contains(id, "..") {
		return fmt.Errorf("request_id %q is not allowed: use 1-128 letters, digits, '.', '-' or '_', starting with a letter or digit", id)
	}
	return nil
}

// isRequestFileName reports whether name is a complete request file the
// watcher should take: <id>.json, not a dotfile, not a temp or partial name.
func isRequestFileName(name string) bool {
	stem, ok := strings.CutSuffix(name, ".json")
	return ok && ValidRequestID(stem) == nil
}

// EnsureGroup creates data/ipc/<group>/ and its subdirectories. The host
// calls it when it registers a group, before it mounts the directory into a
// container. The group directory itself stays the host's (so an agent
// cannot swap a subdirectory for a symlink); the subdirectories are handed
// to the container user uid:gid — chowned when the host runs as root,
// opened up (0777) when it cannot chown and the uid differs. uid < 0 means
// the container runs as the host's own user.
func EnsureGroup(root, folder string, uid, gid int) error {
	if err := ValidGroupName(folder); err != nil {
		return err
	}
	dir := filepath.Join(root, folder)
	if fi, err := os.Lstat(dir); err == nil && !fi.IsDir() {
		return fmt.Errorf("ipc directory %s exists but is not a directory", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create ipc directory for group %s: %w", folder, err)
	}
	for _, sub := range groupDirs {
		p := filepath.Join(dir, sub)
		if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("create ipc directory for group %s: %w", folder, err)
		}
		if err := grantToContainerUser(p, uid, gid); err != nil {
			return err
		}
	}
	return nil
}

func grantToContainerUser(p string, uid, gid int) error {
	switch {
	case uid < 0 || uid == os.Geteuid():
		return nil
	case os.Geteuid() == 0:
		if err := os.Chown(p, uid, gid); err != nil {
			return fmt.Errorf("hand %s to the container user: %w", p, err)
		}
	default:
		if err := os.Chmod(p, 0o777); err != nil {
			return fmt.Errorf("open %s to the container user: %w", p, err)
		}
	}
	return nil
}

// GroupDir returns the host path of a group's IPC directory.
func GroupDir(root, folder string) string { return filepath.Join(root, folder) }
