package web

import (
	"context"
	"path/filepath"
	"strings"
	"sync"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runs"
)

// nameCache remembers each run's pipeline name: it never changes, and the
// runs list would otherwise read a run's first event for every row.
type nameCache struct {
	mu    sync.Mutex
	max   int
	names map[string]string
}

func newNameCache(max int) *nameCache { return &nameCache{max: max, names: map[string]string{}} }

// pipelineName is the run's pipeline as people know it: the graph's label
// or name, as its first event (PipelineStarted) recorded it; before that,
// the stored file's name ("demo" for demo.dot), or "" when it was pasted.
func (s *Server) pipelineName(ctx context.Context, run runs.Run) string {
	c := s.names
	c.mu.Lock()
	name, ok := c.names[run.ID]
	c.mu.Unlock()
	if ok {
		return name
	}
	events, err := s.opts.Store.Events(ctx, run.ID, 0, 1)
	if err != nil || len(events) == 0 || events[0].Type != engine.EventPipelineStarted || events[0].Label == "" {
		return fileStem(run.FileName) // not started yet: ask again next time
	}
	name = events[0].Label
	c.mu.Lock()
	if len(c.names) >= c.max {
		clear(c.names) // names are cheap to read again; a bound is what matters
	}
	c.names[run.ID] = name
	c.mu.Unlock()
	return name
}

// fileStem is a stored pipeline's name from its file; the dashboard's and
// the API's pasted pipelines are all "pipeline.dot", which names nothing.
func fileStem(file string) string {
	stem := strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
	if stem == "pipeline" || stem == "." {
		return ""
	}
	return stem
}
