package ipc

import (
	"bufio"
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

// ProcessedStore remembers the answer to every request that was handled,
// so a request seen again (a retry, a copy, a re-claim after a crash) is
// answered with the original response instead of being acted on twice.
// The host may implement it on SQLite; FileProcessed is the default.
type ProcessedStore interface {
	// Lookup returns the recorded response for a group's request id. An
	// error means "cannot tell": the watcher then answers that the agent
	// should retry, rather than risk acting twice.
	Lookup(ctx context.Context, group, requestID string) (Response, bool, error)
	// Record stores the response for a group's request id. When one is
	// already recorded, the first stays.
	Record(ctx context.Context, group, requestID string, resp Response) error
}

// FileProcessed is an in-memory ProcessedStore backed by an append-only
// JSON-lines file, so it survives restarts. Entries older than the
// retention are dropped when the file is opened.
type FileProcessed struct {
	mu      sync.Mutex
	entries map[processedKey]Response
	file    *os.File // nil: memory only
}

type processedKey struct{ group, id string }

type processedLine struct {
	Group    string   `json:"group"`
	ID       string   `json:"id"`
	Response Response `json:"response"`
}

// NewMemoryProcessed returns a store that forgets everything on restart
// (tests, benchmarks).
func NewMemoryProcessed() *FileProcessed {
	return &FileProcessed{entries: map[processedKey]Response{}}
}

// OpenFileProcessed loads (and compacts) the log at path, creating it if needed.
func OpenFileProcessed(path string, retention time.Duration) (*FileProcessed, error) {
	p := NewMemoryProcessed()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create processed-request log directory: %w", err)
	}
	if err := p.load(path, time.Now().Add(-retention)); err != nil {
		return nil, err
	}
	if err := p.compact(path); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open processed-request log: %w", err)
	}
	p.file = f
	return p, nil
}

// load reads the log, skipping a torn last line from a crash mid-append.
func (p *FileProcessed) load(path string, cutoff time.Time) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read processed-request log: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var l processedLine
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.Response.At.Before(cutoff) {
			continue
		}
		p.entries[processedKey{l.Group, l.ID}] = l.Response
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read processed-request log %s: %w", path, err)
	}
	return nil
}

// compact rewrites the log with only the retained entries.
func (p *FileProcessed) compact(path string) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("compact processed-request log: %w", err)
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for k, r := range p.entries {
		if err := enc.Encode(processedLine{Group: k.group, ID: k.id, Response: r}); err != nil {
			f.Close()
			return fmt.Errorf("compact processed-request log: %w", err)
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("compact processed-request log: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("compact processed-request log: %w", err)
	}
	return os.Rename(tmp, path)
}

// Lookup implements ProcessedStore.
func (p *FileProcessed) Lookup(_ context.Context, group, requestID string) (Response, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.entries[processedKey{group, requestID}]
	return r, ok, nil
}

// Record implements ProcessedStore. The line is appended in one write, so a
// crash leaves at most a torn last line, which load skips.
func (p *FileProcessed) Record(_ context.Context, group, requestID string, resp Response) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := processedKey{group, requestID}
	if _, seen := p.entries[key]; seen {
		return nil
	}
	p.entries[key] = resp
	if p.file == nil {
		return nil
	}
	line, err := json.Marshal(processedLine{Group: group, ID: requestID, Response: resp})
	if err != nil {
		return fmt.Errorf("record request %s/%s: %w", group, requestID, err)
	}
	if _, err := p.file.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("record request %s/%s: %w", group, requestID, err)
	}
	return nil
}

// Close closes the log file.
func (p *FileProcessed) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.file == nil {
		return nil
	}
	err := p.file.Close()
	p.file = nil
	return err
}
