package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"nanohost/internal/pipeline/script"
)

// scriptAgent answers from a mounted script file (the engine's S.json
// format), for tests and demos: the same responses, delays, failures and
// structured outcomes as the engine's script backend, but travelling the
// whole container path. A structured outcome is written as the dispatch's
// status file, exactly where a real agent would write one.
type scriptAgent struct {
	s *script.Script
}

func loadScriptAgent(path string) (agent, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("agent=script: %w (mount a script file there or pass --script)", err)
	}
	return parseScriptAgent(data, path)
}

func parseScriptAgent(data []byte, from string) (agent, error) {
	s, err := script.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("agent=script: %s: %w", from, err)
	}
	return &scriptAgent{s: s}, nil
}

func (a *scriptAgent) Answer(ctx context.Context, c call) (reply, error) {
	rep := reply{sessionID: c.req.SessionID}
	if rep.sessionID == "" || c.req.ForkSession {
		rep.sessionID = newSessionID() // a fork is a conversation of its own
	}
	resp, ok := a.s.Response(c.req.NodeID, c.execution)
	if !ok {
		rep.text = fmt.Sprintf("[Script] %s done\n[outcome:success]", c.req.NodeID)
		return rep, nil
	}
	if d := resp.Delay(); d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return rep, ctx.Err()
		}
	}
	if resp.Error != "" {
		err := fmt.Errorf("script: node %s execution %d: %s", c.req.NodeID, c.execution, resp.Error)
		if resp.Transient {
			return rep, &transientError{err}
		}
		return rep, err
	}
	rep.text = sessionWords(resp.Text, c.req.SessionID, rep.sessionID)
	out, err := resp.Outcome()
	if err != nil {
		return rep, fmt.Errorf("script: node %s execution %d: %w", c.req.NodeID, c.execution, err)
	}
	if out != nil {
		data, err := out.MarshalStatusFile()
		if err == nil {
			err = writeAtomic(c.outcomeFile, data)
		}
		if err != nil {
			return rep, fmt.Errorf("write status file: %w", err)
		}
	}
	return rep, nil
}

func newSessionID() string {
	var b [8]byte
	rand.Read(b[:])
	return "script-" + hex.EncodeToString(b[:])
}

// writeAtomic writes path through a temp file and a rename, so the host
// never reads half a file.
func writeAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".status-*.tmp")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// sessionWords lets a script say which conversation it continued:
// {{resumed_from}} is the session the request resumed ("none" for a new
// one) and {{session}} the session the answer belongs to.
func sessionWords(text, resumedFrom, session string) string {
	if resumedFrom == "" {
		resumedFrom = "none"
	}
	return strings.NewReplacer("{{resumed_from}}", resumedFrom, "{{session}}", session).Replace(text)
}
