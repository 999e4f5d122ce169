package container

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"nanohost/internal/pipeline/engine"
)

// runTool runs the node's tool_command with `sh -c` in a fresh container
// with the workspace mounted, never on the host. A non-zero exit is not an
// error: the engine routes on Result.ExitCode.
func (b *Backend) runTool(ctx context.Context, req engine.Request) (engine.Result, error) {
	if strings.TrimSpace(req.ToolCommand) == "" {
		return engine.Result{}, fmt.Errorf("tool node %s has no tool_command", req.NodeID)
	}
	env, err := b.runEnv(req.RunID)
	if err != nil {
		return engine.Result{}, err
	}
	uid, gid, err := resolveUser(b.cfg.User, env.Workspace)
	if err != nil {
		return engine.Result{}, err
	}
	spec, err := b.baseSpec(req, env, containerName(req.RunID, req.NodeID), uid, gid)
	if err != nil {
		return engine.Result{}, err
	}
	spec.Labels[LabelKind] = "tool"
	if isRemote(b.cfg.Runtime) {
		spec.Mounts = withoutIPCQueues(spec.Mounts) // no runner in a tool container relays them
	}
	spec.Entrypoint, spec.Cmd = []string{"/bin/sh", "-c"}, []string{req.ToolCommand}

	release, err := b.acquireSlot(ctx, req.RunID)
	if err != nil {
		return engine.Result{}, err
	}
	h, err := b.cfg.Runtime.Start(ctx, spec)
	if err != nil {
		release()
		return engine.Result{}, startError(req.NodeID, err)
	}
	b.emit(Event{Kind: EventStarted, Container: h.Name, ID: h.ID, RunID: req.RunID, NodeID: req.NodeID})
	defer b.cleanupTool(h, release, req)

	out, err := b.collectToolOutput(ctx, h, req.StageDir)
	if err != nil {
		return engine.Result{}, err
	}
	waitCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	exit, err := b.cfg.Runtime.Wait(waitCtx, h.ID)
	if err != nil {
		return engine.Result{}, engine.Transient(fmt.Errorf("tool node %s: %w", req.NodeID, err))
	}
	if exit.OOMKilled {
		out += fmt.Sprintf("\n[nanohost: the tool was killed for exceeding its %d-byte memory limit]", b.cfg.Limits.MemoryBytes)
	}
	return engine.Result{ExitCode: exit.Code, Output: out}, nil
}

// collectToolOutput drains the container's stdout and stderr into the stage
// directory (each file bounded) and a bounded combined copy, until the
// container ends or ctx does (then the container is killed).
func (b *Backend) collectToolOutput(ctx context.Context, h *Handle, stageDir string) (string, error) {
	combined := newHeadTail(b.cfg.MaxToolOutput)
	var wg sync.WaitGroup
	var files []*cappedFile
	for _, stream := range []struct {
		r    io.Reader
		name string
	}{{h.Stdout, "stdout.txt"}, {h.Stderr, "stderr.txt"}} {
		var w io.Writer = combined
		if stageDir != "" {
			f, err := newCappedFile(filepath.Join(stageDir, stream.name), b.cfg.MaxToolLog)
			if err != nil {
				return "", err
			}
			files = append(files, f)
			w = io.MultiWriter(combined, f)
		}
		wg.Go(func() { io.Copy(w, stream.r) })
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		killCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		b.cfg.Runtime.Kill(killCtx, h.ID)
		cancel()
		h.Close()
		<-done
		err = ctx.Err()
	}
	for _, f := range files {
		err = errors.Join(err, f.Close())
	}
	return combined.String(), err
}

func (b *Backend) cleanupTool(h *Handle, release func(), req engine.Request) {
	h.Close()
	release()
	b.background(req.RunID, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := b.cfg.Runtime.Remove(ctx, h.ID); err != nil {
			b.log.Warn("remove tool container", "err", err)
		}
		b.emit(Event{Kind: EventStopped, Container: h.Name, ID: h.ID, RunID: req.RunID, NodeID: req.NodeID, Reason: "tool finished"})
	})
}

// headTail keeps the first and last max/2 bytes of what is written, so both
// the start of a tool's output and its final error survive.
type headTail struct {
	mu    sync.Mutex
	half  int
	head  []byte
	tail  *tailBuffer
	total int64
}

func newHeadTail(max int) *headTail {
	return &headTail{half: max / 2, tail: newTailBuffer(max - max/2)}
}

func (h *headTail) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.total += int64(len(p))
	rest := p
	if room := h.half - len(h.head); room > 0 {
		n := min(room, len(rest))
		h.head = append(h.head, rest[:n]...)
		rest = rest[n:]
	}
	if len(rest) > 0 {
		h.tail.Write(rest)
	}
	return len(p), nil
}

func (h *headTail) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tail.mu.Lock()
	tail := string(h.tail.buf)
	h.tail.mu.Unlock()
	omitted := h.total - int64(len(h.head)) - int64(len(tail))
	if omitted <= 0 {
		return string(h.head) + tail
	}
	return fmt.Sprintf("%s\n[… %d bytes omitted …]\n%s", h.head, omitted, tail)
}

// cappedFile writes up to max bytes to a file and notes what it dropped.
type cappedFile struct {
	f       *os.File
	max     int64
	written int64
	dropped int64
}

// A file already at path (an earlier visit's, or a planted symlink) is
// replaced, never written through.
func newCappedFile(path string, max int64) (*cappedFile, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("tool output file: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return nil, fmt.Errorf("tool output file: %w", err)
	}
	return &cappedFile{f: f, max: max}, nil
}

func (c *cappedFile) Write(p []byte) (int, error) {
	room := c.max - c.written
	n := int64(len(p))
	if n > room {
		c.dropped += n - max(room, 0)
		n = max(room, 0)
	}
	if n > 0 {
		if _, err := c.f.Write(p[:n]); err != nil {
			return 0, err
		}
		c.written += n
	}
	return len(p), nil
}

func (c *cappedFile) Close() error {
	if c.dropped > 0 {
		fmt.Fprintf(c.f, "\n[nanohost: output truncated, %d more bytes not kept]\n", c.dropped)
	}
	return c.f.Close()
}
