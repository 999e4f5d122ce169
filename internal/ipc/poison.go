package ipc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// A poison request is one whose handling kills the host: an amplification
// bomb that runs it out of memory, a request that trips a crash. The claimed
// file survives the crash in .processing and is offered again at the next
// start (that is how an interrupted request is finished), so without a
// limit the host would crash again, and again: a crash loop nobody can stop
// without deleting the file by hand.
//
// The rule: before the Host acts on a request, the watcher records one more
// attempt in a marker file, .processing/<group>/.attempts/<queue>-<file>;
// the marker goes when the request is finished. An attempt cut short by a
// clean shutdown does not count: when the watcher is told to stop while a
// request is in the Host's hands, it takes that attempt back before the
// process may exit. So the marker counts the times the host died, outside a
// shutdown, while acting on this request. A request found with
// poisonAttempts of them is not handled again: it is quarantined with the
// reason, its agent gets a rejection, and the group's chat is told. One
// death is not enough — the host may have died of something else (the
// kernel's OOM killer picking it for another process's memory, a power
// cut); two in a row while acting on the same request are the request.
const poisonAttempts = 2

// dirAttempts holds the attempt markers, beside the queues in a group's
// processing directory (listClaimed only looks in the queues).
const dirAttempts = ".attempts"

// attemptRecord is the content of a marker file.
type attemptRecord struct {
	Attempts int       `json:"attempts"`
	Last     time.Time `json:"last"` // when the latest counted attempt began
	PID      int       `json:"pid"`  // the process that made it
}

// attempt is one request's marker while the Host acts on it.
type attempt struct {
	path string
	rec  attemptRecord

	mu       sync.Mutex
	finished bool
}

func (w *Watcher) attemptPath(group string, p pending) string {
	return filepath.Join(w.processingDir(group), dirAttempts, string(p.queue)+"-"+p.name)
}

// previousAttempts reads how many counted attempts a claimed request has
// had; a missing or unreadable marker counts as none (an unreadable one was
// torn by the crash it would have counted).
func previousAttempts(path string) attemptRecord {
	var rec attemptRecord
	data, err := os.ReadFile(path)
	if err == nil {
		_ = json.Unmarshal(data, &rec)
	}
	return rec
}

// beginAttempt records one more attempt before the Host acts on the
// request. If ctx (the watcher's) ends while the attempt runs, the attempt
// is taken back: a shutdown is not the request's fault.
func (w *Watcher) beginAttempt(ctx context.Context, group string, p pending, prev attemptRecord) (*attempt, func()) {
	a := &attempt{path: w.attemptPath(group, p), rec: prev}
	a.rec.Attempts++
	a.rec.Last, a.rec.PID = w.cfg.Now().UTC(), os.Getpid()
	if err := writeAttempt(a.path, a.rec); err != nil {
		w.log.Warn("ipc: cannot record a handling attempt; a request that crashes the host would be handled again", "group", group, "file", p.name, "err", err)
	}
	stop := context.AfterFunc(ctx, func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		if !a.finished {
			if err := writeAttempt(a.path, prev); err != nil {
				w.log.Warn("ipc: cannot take back an attempt interrupted by the shutdown", "group", group, "file", p.name, "err", err)
			}
		}
	})
	return a, func() { stop() }
}

// done removes the marker: the Host is done with the request. It runs
// before the claimed file is removed, so a crash in between leaves a claimed
// file without a marker (answered from the record at the next start), never
// a marker that a later request of the same file name would inherit.
func (a *attempt) done() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.finished = true
	_ = writeAttempt(a.path, attemptRecord{})
}

// clearAttempts removes a stale marker: a request just claimed has had no
// attempt yet, whatever an earlier file of the same name went through.
func (w *Watcher) clearAttempts(group string, p pending) {
	_ = writeAttempt(w.attemptPath(group, p), attemptRecord{})
}

// writeAttempt replaces the marker atomically (temp file + rename), so a
// crash mid-write leaves the old count, never a torn file.
func writeAttempt(path string, rec attemptRecord) error {
	if rec.Attempts <= 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// poisoned is the verdict for a request that killed the host poisonAttempts
// times: quarantined, with the agent told why and how to go on.
func poisoned(req Request, rec attemptRecord) verdict {
	v := rejected(req, fmt.Sprintf("the host stopped %d times while handling this request, so it is not handled again "+
		"(it would stop the host once more); if it is legitimate, make it smaller or simpler and submit it under a new request id", rec.Attempts))
	v.quarantine = fmt.Sprintf("poison: the host died %d times while handling this request (the last attempt began at %s in process %d); "+
		"it is quarantined instead of being handled again at start-up", rec.Attempts, rec.Last.Format(time.RFC3339), rec.PID)
	return v
}
