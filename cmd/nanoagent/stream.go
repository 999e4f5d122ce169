package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"nanohost/internal/bounded"
	"nanohost/internal/container/protocol"
	"nanohost/internal/ipc"
)

// The stream transport (docs/agent-protocol.md, "Stream transport"): the
// container shares no directory with the host (a Kubernetes pod, maybe on
// another node), so stdin stays open after the first request and carries
// authenticated frames — follow-ups, close, the host's answers to the
// agent's IPC requests — while stdout carries the results (with their status
// files) and the agent's IPC requests, which the runner picks up from the
// container's own /workspace/ipc/{tasks,messages} exactly where
// `nanoagent ipc` writes them.

// maxRelayedFile bounds an IPC request file the runner relays: base64 in an
// 8 MiB result block leaves room for 4 MiB (the host's own limit is lower).
const maxRelayedFile = 4 << 20

// serveStream answers the first request, then the follow-ups that arrive on
// stdin, until a close frame, the end of stdin, or ctx.
func (r *runner) serveStream(ctx context.Context, first protocol.Request, stdin io.Reader) error {
	for _, sub := range append([]string{"outcome", ipc.DirResponses}, queueDirs()...) {
		if err := os.MkdirAll(filepath.Join(r.opts.ipcDir, sub), 0o755); err != nil {
			return fmt.Errorf("IPC directory: %w", err)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	requests := make(chan protocol.Request, 16)
	go r.readFrames(stdin, requests)
	go r.relayRequests(ctx)

	if err := r.answer(ctx, first); err != nil || first.Once {
		return err
	}
	for {
		select {
		case req, ok := <-requests:
			if !ok {
				r.log.Info("close requested")
				return nil
			}
			if err := checkRequest(req); err != nil {
				res := protocol.Result{DispatchID: req.DispatchID, Status: protocol.StatusError, Error: "bad request: " + err.Error()}
				if err := protocol.WriteResult(r.out, r.nonce, res); err != nil {
					return err
				}
				continue
			}
			if err := r.answer(ctx, req); err != nil {
				return err
			}
		case <-ctx.Done():
			return nil
		}
	}
}

func queueDirs() []string {
	var dirs []string
	for _, q := range ipc.Queues {
		dirs = append(dirs, string(q))
	}
	return dirs
}

// readFrames reads stdin frames until close or EOF (both close requests).
// A frame without a valid tag did not come from the host and is dropped.
func (r *runner) readFrames(stdin io.Reader, requests chan<- protocol.Request) {
	defer close(requests)
	br := bufio.NewReaderSize(stdin, 64<<10)
	for {
		line, err := readBoundedLine(br, maxRequestBytes)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				r.log.Warn("stdin ended", "err", err)
			}
			return
		}
		if len(line) == 0 {
			continue
		}
		body, err := protocol.DecodeFrame(r.nonce, line)
		if err != nil {
			r.log.Warn("ignored a stdin frame", "err", err)
			continue
		}
		switch body.Kind {
		case protocol.FrameRequest:
			if body.Request != nil {
				req := *body.Request
				req.Nonce, req.Secrets, req.Script = "", nil, nil
				requests <- req
			}
		case protocol.FrameClose:
			return
		case protocol.FrameIPCResponse:
			if err := r.deliverResponse(body.IPC); err != nil {
				r.log.Warn("could not deliver the host's IPC answer", "err", err)
			}
		default:
			r.log.Warn("ignored a stdin frame of unknown kind", "kind", body.Kind)
		}
	}
}

// readBoundedLine reads one line (without its newline); a longer one than
// max is an error, since a frame that big cannot be the host's.
func readBoundedLine(br *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		line = append(line, frag...)
		if len(line) > max+1 {
			return nil, fmt.Errorf("a stdin frame is larger than %d bytes", max)
		}
		switch {
		case err == nil:
			return line[:len(line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) > 0:
			return line, nil
		default:
			return nil, err
		}
	}
}

// deliverResponse writes the host's answer where `nanoagent ipc` waits for
// it, atomically.
func (r *runner) deliverResponse(f *protocol.IPCFile) error {
	if f == nil || f.Dir != ipc.DirResponses || !protocol.ValidIPCFileName(f.Name) {
		return fmt.Errorf("not a response file: %+v", f)
	}
	dir := filepath.Join(r.opts.ipcDir, ipc.DirResponses)
	tmp, err := os.CreateTemp(dir, "."+f.Name+".*.tmp")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(f.Data)
	if err := errors.Join(werr, tmp.Close(), os.Chmod(tmp.Name(), 0o644)); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, f.Name))
}

// relayRequests sends every complete request file that appears in the
// queue directories to the host, in name order (ids sort by time), and
// removes it. It watches with inotify plus the backstop rescan, or polls.
func (r *runner) relayRequests(ctx context.Context) {
	var seq int64
	var wakes []<-chan struct{}
	period := backstopInterval
	for _, q := range queueDirs() {
		if r.opts.watch == "poll" {
			period = r.opts.pollInterval
			continue
		}
		wake, err := inotifyWatch(filepath.Join(r.opts.ipcDir, q))
		if err != nil {
			r.log.Warn("inotify unavailable, polling the IPC queues", "err", err)
			period = r.opts.pollInterval
			continue
		}
		wakes = append(wakes, wake)
	}
	wake := merge(ctx, wakes)
	for {
		for _, q := range queueDirs() {
			for _, name := range pendingRequests(filepath.Join(r.opts.ipcDir, q)) {
				path := filepath.Join(r.opts.ipcDir, q, name)
				data, err := readRegular(path, maxRelayedFile)
				os.Remove(path)
				if err != nil {
					r.log.Warn("dropped an IPC request file", "file", q+"/"+name, "err", err)
					continue
				}
				seq++
				if err := protocol.WriteIPC(r.out, r.nonce, protocol.IPCFile{Seq: seq, Dir: q, Name: name, Data: data}); err != nil {
					r.log.Warn("could not relay an IPC request", "file", q+"/"+name, "err", err)
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-time.After(period):
		}
	}
}

// merge fans several wake channels into one.
func merge(ctx context.Context, chans []<-chan struct{}) <-chan struct{} {
	out := make(chan struct{}, 1)
	for _, c := range chans {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-c:
					select {
					case out <- struct{}{}:
					default:
					}
				}
			}
		}()
	}
	return out
}

// pendingRequests lists the complete request files of a queue directory
// (not dotfiles or temp names), sorted.
func pendingRequests(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && protocol.ValidIPCFileName(e.Name()) {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names
}

// readOutcomeFile reads the status file of a dispatch for the result (nil
// when the agent wrote none) and removes it. Like the host on the file
// transport, it reads only a regular file, without following a symlink or
// blocking on a FIFO, and at most 1 MiB.
func readOutcomeFile(path string) ([]byte, error) {
	data, err := readRegular(path, 1<<20)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err == nil {
		os.Remove(path)
	}
	return data, err
}

// readRegular reads a regular file of at most max bytes.
func readRegular(path string, max int64) ([]byte, error) {
	st, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s)", filepath.Base(path), st.Mode().Type())
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return bounded.Read(f, filepath.Base(path), max)
}

// lockedWriter serialises writes to stdout: results and IPC blocks come
// from different goroutines, and each block must reach the host whole.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
