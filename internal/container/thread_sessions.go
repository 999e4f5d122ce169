package container

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// A full-fidelity thread's agent session id is also kept in the state
// directory, one small JSON file per run ({thread: session id}), so the
// conversation goes on when the run is resumed — by another process after a
// crash or a restart (`nanohost pipeline resume`, the host resuming its
// interrupted runs), or by this one after the run's backend was closed.

// threadSessionTTL is how long a run's session file outlives its last
// change; CleanupOrphans removes older ones.
const threadSessionTTL = 30 * 24 * time.Hour

func (b *Backend) threadSessionsFile(runID string) string {
	sum := sha256.Sum256([]byte(runID))
	return filepath.Join(b.cfg.StateDir, "threads", safeName(runID)+"-"+hex.EncodeToString(sum[:4])+".json")
}

// loadThreadSessions reads a run's recorded sessions (none when there is no
// file or it is unreadable: a new conversation is the safe fallback).
func (b *Backend) loadThreadSessions(runID string) map[string]string {
	data, err := os.ReadFile(b.threadSessionsFile(runID))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			b.log.Warn("read recorded agent sessions", "run", runID, "err", err)
		}
		return map[string]string{}
	}
	m := map[string]string{}
	if err := json.Unmarshal(data, &m); err != nil {
		b.log.Warn("recorded agent sessions are corrupt; threads start new conversations", "run", runID, "err", err)
		return map[string]string{}
	}
	return m
}

// recordedSession is the session recorded for a thread, or "".
func (b *Backend) recordedSession(key threadKey) string {
	b.sessionsMu.Lock()
	defer b.sessionsMu.Unlock()
	return b.loadThreadSessions(key.run)[key.thread]
}

// recordSession stores a thread's session id (atomically: temp + rename).
func (b *Backend) recordSession(key threadKey, sessionID string) {
	b.sessionsMu.Lock()
	defer b.sessionsMu.Unlock()
	m := b.loadThreadSessions(key.run)
	m[key.thread] = sessionID
	data, _ := json.Marshal(m)
	path := b.threadSessionsFile(key.run)
	err := os.MkdirAll(filepath.Dir(path), 0o700)
	if err == nil {
		err = writeFileAtomic(path, data, 0o600)
	}
	if err != nil {
		b.log.Warn("record the agent session; a resumed run will start a new conversation", "run", key.run, "thread", key.thread, "err", err)
	}
}

// pruneThreadSessions removes session files of runs untouched for threadSessionTTL.
func (b *Backend) pruneThreadSessions() {
	files, _ := filepath.Glob(filepath.Join(b.cfg.StateDir, "threads", "*.json"))
	for _, f := range files {
		if st, err := os.Stat(f); err == nil && time.Since(st.ModTime()) > threadSessionTTL {
			os.Remove(f)
		}
	}
}

// writeFileAtomic writes path through a temp file in the same directory and
// a rename: readers never see half a file, and a symlink planted at path is
// replaced, never followed.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr, os.Chmod(tmp.Name(), perm)); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return nil
}
