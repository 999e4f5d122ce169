// Package client is the agent's side of nanohost IPC: it writes requests
// into the mounted IPC directory (/workspace/ipc) the way the host expects
// — a temp file renamed into place — and waits for the host's answer in
// responses/<request_id>.json. `nanoagent ipc …` is a thin shell around it
// (see Main), so agents never hand-craft JSON.
package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"nanohost/internal/ipc"
)

// EnvDir overrides the IPC directory (tests, or a runtime that mounts it elsewhere).
const EnvDir = "NANOHOST_IPC_DIR"

// DefaultDir is where the host mounts the group's IPC directory.
const DefaultDir = "/workspace/ipc"

// ErrNoAnswer means the host did not answer within the timeout.
var ErrNoAnswer = errors.New("no answer from the host")

// Client submits requests and waits for answers.
type Client struct {
	Dir  string        // the IPC directory
	Poll time.Duration // how often Wait looks for the answer
}

// New returns a client for $NANOHOST_IPC_DIR, or /workspace/ipc.
func New() *Client {
	dir := os.Getenv(EnvDir)
	if dir == "" {
		dir = DefaultDir
	}
	return &Client{Dir: dir, Poll: 10 * time.Millisecond}
}

// NewRequestID returns a fresh id that sorts by creation time, so the host
// handles an agent's requests in the order it wrote them.
func NewRequestID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%019d-%s", time.Now().UnixNano(), hex.EncodeToString(b[:]))
}

// Submit writes req into its queue directory atomically and returns its
// request id. It fills in the version and, when empty, the request id.
func (c *Client) Submit(req ipc.Request) (string, error) {
	env := envelopeOf(req)
	if env == nil {
		return "", fmt.Errorf("unsupported request %T", req)
	}
	env.V = ipc.Version
	if env.RequestID == "" {
		env.RequestID = NewRequestID()
	}
	if err := ipc.ValidRequestID(env.RequestID); err != nil {
		return "", err
	}
	q, ok := ipc.QueueFor(env.Type)
	if !ok {
		return "", fmt.Errorf("unknown request type %q", env.Type)
	}
	data, err := encode(req)
	if err != nil {
		return "", fmt.Errorf("encode %s request: %w", env.Type, err)
	}
	if max := ipc.DefaultLimits.FileBytes; int64(len(data)) > max {
		return "", fmt.Errorf("the %s request is %d bytes as JSON; the host reads request files of at most %d bytes: make it smaller", env.Type, len(data), max)
	}
	dir := filepath.Join(c.Dir, string(q))
	if err := writeAtomic(dir, env.RequestID+".json", data); err != nil {
		return "", fmt.Errorf("submit %s request (is %s the mounted IPC directory? set %s): %w", env.Type, c.Dir, EnvDir, err)
	}
	return env.RequestID, nil
}

// encode writes req as JSON without HTML escaping: json.Marshal would turn
// every '>' of a DOT edge into the 6 bytes \u003e, so a pipeline well under
// the DOT limit could make a request file over the host's file limit.
func encode(req ipc.Request) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(req); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func envelopeOf(req ipc.Request) *ipc.Envelope {
	switch r := req.(type) {
	case *ipc.StartPipeline:
		r.Type = ipc.TypeStartPipeline
		return &r.Envelope
	case *ipc.CancelPipeline:
		r.Type = ipc.TypeCancelPipeline
		return &r.Envelope
	case *ipc.PipelineStatus:
		r.Type = ipc.TypePipelineStatus
		return &r.Envelope
	case *ipc.SendMessage:
		r.Type = ipc.TypeSendMessage
		return &r.Envelope
	case *ipc.ScheduleTask:
		r.Type = ipc.TypeScheduleTask
		return &r.Envelope
	case *ipc.TaskRef:
		return &r.Envelope // its Type says which (list_tasks, pause_task…)
	}
	return nil
}

// writeAtomic writes dir/name through a dot-prefixed temp file and a
// rename: the host ignores the temp name and sees the whole file at once.
func writeAtomic(dir, name string, data []byte) error {
	f, err := os.CreateTemp(dir, "."+name+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		if werr = os.Chmod(tmp, 0o644); werr == nil {
			werr = os.Rename(tmp, filepath.Join(dir, name))
		}
	}
	if werr != nil {
		os.Remove(tmp)
	}
	return werr
}

// Wait waits for the answer to request id until ctx ends, then removes the
// response file (it has been read). A context deadline becomes ErrNoAnswer.
func (c *Client) Wait(ctx context.Context, id string) (ipc.Response, error) {
	if err := ipc.ValidRequestID(id); err != nil {
		return ipc.Response{}, err
	}
	path := filepath.Join(c.Dir, ipc.DirResponses, id+".json")
	poll := c.Poll
	if poll <= 0 {
		poll = 10 * time.Millisecond
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		data, err := os.ReadFile(path)
		if err == nil {
			var r ipc.Response
			if err := json.Unmarshal(data, &r); err != nil {
				return r, fmt.Errorf("read the host's answer %s: %w", path, err)
			}
			os.Remove(path)
			return r, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return ipc.Response{}, fmt.Errorf("read the host's answer: %w", err)
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return ipc.Response{}, fmt.Errorf("%w to request %s (it may still be handled; check later with: nanoagent ipc wait %s)", ErrNoAnswer, id, id)
			}
			return ipc.Response{}, ctx.Err()
		case <-t.C:
		}
	}
}

// Do submits req and waits for the answer.
func (c *Client) Do(ctx context.Context, req ipc.Request) (ipc.Response, error) {
	id, err := c.Submit(req)
	if err != nil {
		return ipc.Response{}, err
	}
	return c.Wait(ctx, id)
}
