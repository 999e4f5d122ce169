package container

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"nanohost/internal/container/protocol"
	"nanohost/internal/ipc"
	"nanohost/internal/mounts"
)

// agentLink carries what follows the first request between the host and a
// live agent: follow-up requests and the close request to the runner, the
// status file of each result back, and the agent's IPC requests. A Docker
// container shares a directory with the host (fileLink); a container that
// may run on another machine — a Kubernetes pod — shares nothing, and
// everything travels over its attach stream (streamLink).
type agentLink interface {
	// send delivers a follow-up request, authenticated with the nonce.
	send(req protocol.Request) error
	// sendClose asks the runner to finish and exit.
	sendClose() error
	// outcome returns the status file the agent wrote for res, if any.
	outcome(res protocol.Result) (data []byte, ok bool, err error)
	// relay takes an authentic IPC block from the container's stdout.
	relay(f protocol.IPCFile)
	// keepsStdin says whether stdin stays open after the first request.
	keepsStdin() bool
	// remove releases what the link holds (once the container is gone).
	remove()
}

// isRemote reports whether rt's containers share no filesystem with the
// host (Capabilities.Remote).
func isRemote(rt Runtime) bool { return rt.Capabilities().Remote }

// fileLink is the file transport: the container's IPC directory is a bind
// mount of a host directory.
type fileLink struct {
	dir   *ipcDir
	nonce string
	log   *slog.Logger
}

func (l *fileLink) send(req protocol.Request) error {
	data, err := protocol.EncodeInputFile(l.nonce, req)
	if err != nil {
		return err
	}
	return l.dir.writeInput(protocol.InputFileName(req.DispatchID), data)
}

func (l *fileLink) sendClose() error { return l.dir.writeInput(protocol.CloseFile, nil) }

func (l *fileLink) outcome(res protocol.Result) ([]byte, bool, error) {
	return l.dir.readOutcome(res.DispatchID)
}

// relay: a runner on the file transport never sends IPC blocks; the group's
// queues are mounted and the host's watcher reads them directly.
func (l *fileLink) relay(f protocol.IPCFile) {
	l.log.Warn("dropped an IPC block from a container on the file transport", "file", f.Name)
}

func (l *fileLink) keepsStdin() bool { return false }
func (l *fileLink) remove()          { l.dir.remove() }

// streamLink is the stream transport: frames on the container's stdin, and
// the agent's IPC requests relayed into the group's host-side IPC queues,
// whose answers go back on stdin.
type streamLink struct {
	nonce string
	log   *slog.Logger
	// dirs maps an IPC directory name (tasks, messages, responses) to the
	// host directory it stands for; empty when the run has no IPC to the host.
	dirs map[string]string

	mu      sync.Mutex // serialises stdin frames
	stdin   io.WriteCloser
	lastSeq int64
	waiting int
	done    chan struct{}
	once    sync.Once
}

// Bounds of the IPC relay.
const (
	maxRelayWaits    = 32               // IPC requests awaiting the host's answer at once
	relayAnswerLimit = 4 << 20          // a response file relayed back
	relayAnswerWait  = 15 * time.Minute // how long an answer is waited for
	relayPoll        = 20 * time.Millisecond
)

func newStreamLink(stdin io.WriteCloser, nonce string, dirs map[string]string, log *slog.Logger) *streamLink {
	return &streamLink{nonce: nonce, log: log, dirs: dirs, stdin: stdin, done: make(chan struct{})}
}

func (l *streamLink) frame(body protocol.FrameBody) error {
	line, err := protocol.EncodeFrame(l.nonce, body)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.done:
		return errors.New("the agent container's stream is closed")
	default:
	}
	_, err = l.stdin.Write(line)
	return err
}

func (l *streamLink) send(req protocol.Request) error {
	req.Version = protocol.StreamVersion
	return l.frame(protocol.FrameBody{Kind: protocol.FrameRequest, Request: &req})
}

func (l *streamLink) sendClose() error {
	return l.frame(protocol.FrameBody{Kind: protocol.FrameClose})
}

func (l *streamLink) outcome(res protocol.Result) ([]byte, bool, error) {
	if res.OutcomeError != "" {
		return nil, false, fmt.Errorf("status file: %s", res.OutcomeError)
	}
	if len(res.OutcomeFile) == 0 {
		return nil, false, nil
	}
	if len(res.OutcomeFile) > maxOutcomeFile {
		return nil, false, fmt.Errorf("status file is larger than %d bytes", maxOutcomeFile)
	}
	return res.OutcomeFile, true, nil
}

func (l *streamLink) keepsStdin() bool { return true }

func (l *streamLink) remove() {
	l.once.Do(func() {
		l.mu.Lock()
		close(l.done)
		l.stdin.Close()
		l.mu.Unlock()
	})
}

// relay puts an IPC request of the agent into the group's host-side queue,
// where the host's IPC watcher handles it as if the agent had written it
// there through a mount, then sends the answer back.
func (l *streamLink) relay(f protocol.IPCFile) {
	if f.Seq <= l.lastSeq {
		l.log.Warn("dropped a replayed IPC block", "seq", f.Seq, "last", l.lastSeq)
		return
	}
	l.lastSeq = f.Seq // relay is called from the one stdout reader, in order
	if f.Dir == ipc.DirResponses || !protocol.ValidIPCFileName(f.Name) {
		l.log.Warn("dropped an IPC block that is not a request", "dir", f.Dir, "file", f.Name)
		return
	}
	queue, responses := l.dirs[f.Dir], l.dirs[ipc.DirResponses]
	if queue == "" || responses == "" {
		l.answer(f.Name, failedAnswer(f.Name, "this agent has no IPC connection to a nanohost host (nanohost pipeline run does not serve IPC requests; nanohost serve does)"))
		return
	}
	l.mu.Lock()
	busy := l.waiting >= maxRelayWaits
	if !busy {
		l.waiting++
	}
	l.mu.Unlock()
	if busy {
		l.answer(f.Name, failedAnswer(f.Name, fmt.Sprintf("more than %d IPC requests are waiting for the host: wait for their answers first", maxRelayWaits)))
		return
	}
	if err := writeInto(queue, f.Name, f.Data); err != nil {
		l.log.Warn("could not relay an IPC request", "file", f.Name, "err", err)
		l.answer(f.Name, failedAnswer(f.Name, "the host could not queue the request: "+err.Error()))
		l.doneWaiting()
		return
	}
	go func() {
		defer l.doneWaiting()
		l.awaitAnswer(responses, f.Name)
	}()
}

func (l *streamLink) doneWaiting() {
	l.mu.Lock()
	l.waiting--
	l.mu.Unlock()
}

// awaitAnswer waits for the host's response file and sends it back.
func (l *streamLink) awaitAnswer(dir, name string) {
	deadline := time.After(relayAnswerWait)
	tick := time.NewTicker(relayPoll)
	defer tick.Stop()
	for {
		data, err := takeFile(dir, name, relayAnswerLimit)
		switch {
		case err == nil:
			l.answer(name, data)
			return
		case !errors.Is(err, fs.ErrNotExist):
			l.log.Warn("could not read the host's IPC answer", "file", name, "err", err)
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			return
		case <-l.done:
			return
		}
	}
}

func (l *streamLink) answer(name string, data []byte) {
	err := l.frame(protocol.FrameBody{Kind: protocol.FrameIPCResponse,
		IPC: &protocol.IPCFile{Dir: ipc.DirResponses, Name: name, Data: data}})
	if err != nil {
		l.log.Debug("could not send an IPC answer to the agent", "file", name, "err", err)
	}
}

// failedAnswer is an IPC response refusing a request the host never saw.
func failedAnswer(name, reason string) []byte {
	data, _ := json.MarshalIndent(ipc.Response{V: ipc.Version, RequestID: strings.TrimSuffix(name, ".json"),
		Status: ipc.Failed, Reason: reason, At: time.Now().UTC()}, "", "  ")
	return data
}

// writeInto writes dir/name atomically through an os.Root of dir.
func writeInto(dir, name string, data []byte) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	var rnd [6]byte
	rand.Read(rnd[:])
	tmp := "." + name + "." + hex.EncodeToString(rnd[:]) + ".tmp"
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	if err := errors.Join(werr, f.Close()); err != nil {
		root.Remove(tmp)
		return err
	}
	if err := root.Rename(tmp, name); err != nil {
		root.Remove(tmp)
		return err
	}
	return nil
}

// takeFile reads and removes dir/name, a regular file of at most max bytes.
func takeFile(dir, name string, max int64) ([]byte, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	st, err := root.Lstat(name)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		root.Remove(name)
		return nil, fmt.Errorf("%s is not a regular file", filepath.Join(dir, name))
	}
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	root.Remove(name)
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%s is larger than %d bytes", name, max)
	}
	return data, nil
}

// transport sets the agent's container up for the file or the stream
// transport and returns how to make its link once it runs, and how to undo
// the set-up if it never does.
func (b *Backend) transport(spec *Spec, first *protocol.Request, uid, gid int, log *slog.Logger) (func(*Handle) agentLink, func(), error) {
	if !isRemote(b.cfg.Runtime) {
		dir, err := newIPCDir(filepath.Join(b.cfg.StateDir, "ipc", safeName(spec.Labels[LabelRun]), spec.Name), uid, gid)
		if err != nil {
			return nil, nil, err
		}
		spec.Mounts = append(spec.Mounts, mounts.Mount{Source: dir.path, Target: protocol.IPCDir})
		nonce := first.Nonce
		return func(*Handle) agentLink { return &fileLink{dir: dir, nonce: nonce, log: log} }, dir.remove, nil
	}
	dirs, err := streamSpec(spec, first)
	if err != nil {
		return nil, nil, err
	}
	nonce := first.Nonce
	return func(h *Handle) agentLink { return newStreamLink(h.Stdin, nonce, dirs, log) }, func() {}, nil
}

// streamSpec adapts an agent's container to the stream transport: the
// group's IPC queues mounted under /workspace/ipc become relayed
// directories (returned by name), a script file travels in the first
// request, and the runner gets a private memory-backed /workspace/ipc.
func streamSpec(spec *Spec, first *protocol.Request) (map[string]string, error) {
	dirs := map[string]string{}
	mounts := spec.Mounts[:0:0]
	for _, m := range spec.Mounts {
		switch {
		case strings.HasPrefix(m.Target, protocol.IPCDir+"/"):
			dirs[filepath.Base(m.Target)] = m.Source
		case m.Target == protocol.ScriptPath:
			data, err := os.ReadFile(m.Source)
			if err != nil {
				return nil, fmt.Errorf("script for the agent: %w", err)
			}
			first.Script = data
		default:
			mounts = append(mounts, m)
		}
	}
	spec.Mounts = mounts
	if spec.Tmpfs == nil {
		spec.Tmpfs = map[string]string{}
	}
	spec.Tmpfs[protocol.IPCDir] = "rw,nosuid,nodev,size=64m,mode=0755"
	first.Transport, first.Version = protocol.TransportStream, protocol.StreamVersion
	return dirs, nil
}

// withoutIPCQueues drops the group's IPC queues from a tool container on a
// remote runtime: only an agent's runner relays IPC over the stream.
func withoutIPCQueues(mounts []mounts.Mount) []mounts.Mount {
	out := mounts[:0:0]
	for _, m := range mounts {
		if !strings.HasPrefix(m.Target, protocol.IPCDir+"/") {
			out = append(out, m)
		}
	}
	return out
}
