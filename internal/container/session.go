package container

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"nanohost/internal/container/protocol"
)

// session is one agent container and the protocol state to talk to it.
// One dispatch at a time: its owner (a thread, or a one-shot node) serialises.
type session struct {
	rt     Runtime
	h      *Handle
	log    *slog.Logger
	nonce  string
	link   agentLink // follow-ups, status files and IPC after the first request
	redact redactor
	meter  *metered // the container's model gateway pass; nil without a gateway

	results chan protocol.Result // closed when stdout ends (the container is gone)
	gone    chan struct{}        // closed when stdout ends
	stderr  *tailBuffer
	errDone chan struct{} // closed when stderr ends

	release  func() // gives the container slot back
	stopOnce sync.Once
	onStop   func(reason string)

	lastUsed time.Time // guarded by the owner
}

// errSessionGone is wrapped by dispatch errors when the container died.
var errSessionGone = errors.New("agent container exited")

// goneError is a container that stopped without answering. Killed by a
// signal (a crash, the OOM killer) or stopped from outside, it may do better
// next time; a runner that exited with its own error status (bad flags, an
// unreadable script, a protocol mismatch) will fail the same way again.
type goneError struct {
	code   int
	detail string
}

func (e *goneError) Error() string {
	return fmt.Sprintf("%v before answering (%s)", errSessionGone, e.detail)
}

func (e *goneError) Unwrap() error { return errSessionGone }

// retryable reports whether running the node again may help.
func (e *goneError) retryable() bool { return e.code == 0 || e.code >= 128 || e.code < 0 }

// startSession starts the container and sends the first request on stdin;
// link makes the transport for what follows. On error the caller still owns
// release and whatever link would have taken over.
func startSession(ctx context.Context, rt Runtime, spec Spec, link func(*Handle) agentLink, first protocol.Request,
	release func(), log *slog.Logger, redact redactor) (*session, error) {
	h, err := rt.Start(ctx, spec)
	if err != nil {
		return nil, err
	}
	s := &session{rt: rt, h: h, log: log.With("container", h.Name), nonce: first.Nonce, link: link(h), redact: redact,
		results: make(chan protocol.Result, 4), gone: make(chan struct{}), stderr: newTailBuffer(16 << 10),
		errDone: make(chan struct{}),
		release: release, lastUsed: time.Now()}
	go s.readStdout()
	go func() {
		defer close(s.errDone)
		io.Copy(s.stderr, h.Stderr)
	}()
	if err := s.sendFirst(first); err != nil {
		s.stop("could not send the first request")
		return nil, fmt.Errorf("send the first request to %s: %w", h.Name, err)
	}
	return s, nil
}

func (s *session) sendFirst(req protocol.Request) error {
	data, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if _, err := s.h.Stdin.Write(append(data, '\n')); err != nil {
		return err
	}
	if s.link.keepsStdin() {
		return nil
	}
	// Close stdin: nothing else ever travels there, so nothing in the
	// container can later read a request from the pipe.
	return s.h.Stdin.Close()
}

func (s *session) readStdout() {
	defer close(s.gone)
	defer close(s.results)
	sc := protocol.NewScanner(s.h.Stdout, s.nonce)
	sc.Noise = func(line string) { s.log.Debug("agent stdout outside a result", "line", s.redact.String(line)) }
	sc.IPC = s.link.relay
	for {
		res, err := sc.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				s.log.Debug("agent stdout ended", "err", err)
			}
			return
		}
		s.results <- res
	}
}

// alive reports whether the container is still running (as far as we know).
func (s *session) alive() bool {
	select {
	case <-s.gone:
		return false
	default:
		return true
	}
}

// send delivers a follow-up request, tagged so the runner knows the host
// wrote it.
func (s *session) send(req protocol.Request) error { return s.link.send(req) }

// await returns the result for dispatchID. Results for other dispatches are
// stale (an earlier, abandoned dispatch): they are logged and dropped.
func (s *session) await(ctx context.Context, dispatchID int64) (protocol.Result, error) {
	for {
		select {
		case res, ok := <-s.results:
			if !ok {
				return protocol.Result{}, s.goneError(ctx)
			}
			if res.DispatchID != dispatchID {
				s.log.Warn("dropped a stale agent result", "got_dispatch", res.DispatchID, "want_dispatch", dispatchID)
				continue
			}
			return res, nil
		case <-ctx.Done():
			return protocol.Result{}, ctx.Err()
		}
	}
}

// goneError describes a container that stopped without answering.
func (s *session) goneError(ctx context.Context) error {
	waitCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	exit, err := s.rt.Wait(waitCtx, s.h.ID)
	select { // its last words may still be on their way
	case <-s.errDone:
	case <-time.After(2 * time.Second):
	}
	g := &goneError{code: exit.Code, detail: fmt.Sprintf("exit code %d", exit.Code)}
	if err != nil {
		g.code, g.detail = -1, err.Error()
	} else if exit.OOMKilled {
		g.detail += ", killed for exceeding its memory limit"
	}
	if tail := s.redact.String(s.stderr.String()); tail != "" {
		g.detail += "; stderr: " + tail
	}
	return g
}

// close asks the runner to finish (graceful) and waits a little for it,
// then makes sure the container is gone. Safe to call more than once.
func (s *session) close(graceful bool, reason string) {
	if graceful && s.alive() {
		if err := s.link.sendClose(); err == nil {
			s.waitGone(5 * time.Second)
		}
	}
	s.stop(reason)
}

// finish lets a one-shot container exit by itself, then cleans up.
func (s *session) finish() {
	s.waitGone(10 * time.Second)
	s.stop("answered")
}

// waitGone waits up to d for stdout to end, discarding late results.
func (s *session) waitGone(d time.Duration) {
	timeout := time.After(d)
	for {
		select {
		case _, ok := <-s.results:
			if !ok {
				return
			}
		case <-timeout:
			return
		}
	}
}

// stop kills and removes the container, gives its slot back and deletes
// its IPC directory (once).
func (s *session) stop(reason string) {
	s.stopOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.rt.Kill(ctx, s.h.ID); err != nil {
			s.log.Warn("kill agent container", "err", err)
		}
		s.release()
		s.h.Close()
		if err := s.rt.Remove(ctx, s.h.ID); err != nil {
			s.log.Warn("remove agent container", "err", err)
		}
		s.link.remove()
		if s.meter != nil {
			s.meter.pass.Revoke()
		}
		s.log.Debug("agent container stopped", "reason", reason)
		if s.onStop != nil {
			s.onStop(reason)
		}
	})
}

// tailBuffer keeps the last n bytes written to it.
type tailBuffer struct {
	mu    sync.Mutex
	n     int
	buf   []byte
	total int64
}

func newTailBuffer(n int) *tailBuffer { return &tailBuffer{n: n} }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.total += int64(len(p))
	if len(p) >= t.n {
		t.buf = append(t.buf[:0], p[len(p)-t.n:]...)
		return len(p), nil
	}
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.n {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.n:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if dropped := t.total - int64(len(t.buf)); dropped > 0 {
		return fmt.Sprintf("[… %d earlier bytes]%s", dropped, t.buf)
	}
	return string(t.buf)
}
