package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"nanohost/internal/bounded"
	"nanohost/internal/container/protocol"
)

// backstopInterval is how often the inbox is rescanned even when inotify is
// watching, in case an event was lost (overflow, an odd filesystem).
const backstopInterval = 500 * time.Millisecond

// serveInbox answers follow-up requests from the input directory, in
// dispatch-id order, until the close file appears or ctx ends.
func (r *runner) serveInbox(ctx context.Context) error {
	dir := filepath.Join(r.opts.ipcDir, "input")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("input directory: %w", err)
	}
	wake, period := r.watchInbox(dir)
	for {
		ids, closing, err := scanInbox(dir)
		if err != nil {
			return err
		}
		for _, id := range ids {
			if err := r.answerFile(ctx, dir, id); err != nil {
				return err
			}
		}
		if closing {
			r.log.Info("close requested")
			return nil
		}
		if len(ids) > 0 {
			continue // more may have arrived while we worked
		}
		select {
		case <-ctx.Done():
			return nil
		case <-wake:
		case <-time.After(period):
		}
	}
}

// watchInbox returns a channel that fires when the directory changes, and
// the rescan period to use alongside it.
func (r *runner) watchInbox(dir string) (<-chan struct{}, time.Duration) {
	if r.opts.watch == "poll" {
		return nil, r.opts.pollInterval
	}
	wake, err := inotifyWatch(dir)
	if err != nil {
		r.log.Warn("inotify unavailable, polling the inbox", "err", err, "interval", r.opts.pollInterval)
		return nil, r.opts.pollInterval
	}
	return wake, backstopInterval
}

// inotifyWatch signals (coalesced) whenever a file is completed or renamed
// into dir. It uses the raw syscalls so the binary stays dependency-free.
func inotifyWatch(dir string) (<-chan struct{}, error) {
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("inotify_init1: %w", err)
	}
	if _, err := syscall.InotifyAddWatch(fd, dir, syscall.IN_CLOSE_WRITE|syscall.IN_MOVED_TO); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("inotify_add_watch %s: %w", dir, err)
	}
	wake := make(chan struct{}, 1)
	go func() {
		buf := make([]byte, 64*(syscall.SizeofInotifyEvent+syscall.NAME_MAX+1))
		for {
			n, err := syscall.Read(fd, buf)
			if err == syscall.EINTR {
				continue
			}
			if err != nil || n <= 0 {
				return // the backstop rescan keeps the runner going
			}
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	}()
	return wake, nil
}

// scanInbox lists pending request ids (ascending) and whether close was asked.
func scanInbox(dir string) ([]int64, bool, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, false, fmt.Errorf("read input directory: %w", err)
	}
	var ids []int64
	closing := false
	for _, e := range entries {
		if e.Name() == protocol.CloseFile {
			closing = true
			continue
		}
		if id, ok := protocol.ParseInputFileName(e.Name()); ok && e.Type().IsRegular() {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids, closing, nil
}

// answerFile consumes one request file and answers it. A file the host did
// not write (no valid tag: the agent planted it) is dropped unanswered —
// answering it, even with an error, would hand the agent a result for a
// dispatch the host has yet to send. A file of the host's that cannot be
// understood gets an error result, so the host fails fast instead of
// waiting for its timeout.
//
// The file is claimed (renamed to a name of the runner's) before it is
// read: the agent can plant a file under the next dispatch's name, and the
// host's own file then replaces it (rename); had the runner read the
// planted one by its name and then removed that name, it would remove the
// host's file arriving in between, and the dispatch would never be
// answered (the host waits for its timeout). A claimed file is the one
// read and the one removed; whatever arrives under the name after the
// claim is a file of its own, found by the next scan.
func (r *runner) answerFile(ctx context.Context, dir string, id int64) error {
	path := filepath.Join(dir, protocol.InputFileName(id))
	claimed := filepath.Join(dir, fmt.Sprintf(".claimed-%d-%s", id, protocol.NewNonce()[:12]))
	if err := os.Rename(path, claimed); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // gone since the scan
		}
		return fmt.Errorf("claim request file %s: %w", filepath.Base(path), err)
	}
	if afterClaim != nil {
		afterClaim(path)
	}
	req, err := r.readRequestFile(claimed)
	os.Remove(claimed)
	if errors.Is(err, protocol.ErrUnauthenticated) {
		r.log.Warn("ignored a request file the host did not write", "file", filepath.Base(path))
		return nil
	}
	if err == nil && req.DispatchID != id {
		err = fmt.Errorf("file %s carries dispatch_id %d", filepath.Base(path), req.DispatchID)
	}
	if err == nil {
		err = checkRequest(req)
	}
	if err != nil {
		r.log.Warn("bad request file", "file", filepath.Base(path), "err", err)
		res := protocol.Result{DispatchID: id, Status: protocol.StatusError, Error: "bad request file: " + err.Error()}
		return protocol.WriteResult(r.out, r.nonce, res)
	}
	return r.answer(ctx, req)
}

// afterClaim, when set (tests), runs right after a request file is claimed.
var afterClaim func(path string)

func (r *runner) readRequestFile(path string) (protocol.Request, error) {
	data, err := bounded.ReadFile(path, maxRequestBytes)
	if err != nil {
		return protocol.Request{}, err
	}
	req, err := protocol.DecodeInputFile(r.nonce, data)
	if err != nil {
		return req, err
	}
	// Only stdin may carry credentials: a file in a mounted directory is
	// readable by the agent and may outlive the container.
	req.Nonce, req.Secrets = "", nil
	return req, nil
}
