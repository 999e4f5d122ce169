package container

import (
	"context"
	"strings"

	"nanohost/internal/pipeline/engine"
)

// RunBackend is the engine's backend for one pipeline run: every node runs
// in a container working in the run's group workspace — the nodes of child
// pipelines it runs (manager loops, run ids "<run>.<node>-<visit>") too.
// Close ends what the run still holds — its live full-fidelity sessions,
// its children's too — and waits for its containers to be removed.
type RunBackend struct {
	b     *Backend
	runID string
}

// ForRun returns the backend of run runID, whose agents work in env.
func (b *Backend) ForRun(runID string, env RunEnv) *RunBackend {
	b.bind(runID, env)
	return &RunBackend{b: b, runID: runID}
}

// Run implements engine.Backend.
func (r *RunBackend) Run(ctx context.Context, req engine.Request) (engine.Result, error) {
	if !ownRun(r.runID, req.RunID) {
		req.RunID = r.runID
	}
	return r.b.Run(ctx, req)
}

// ownRun reports whether id is run's or one of its child pipelines'.
func ownRun(run, id string) bool { return id == run || strings.HasPrefix(id, run+".") }

// Close ends the run's live sessions and waits for its containers' removal.
func (r *RunBackend) Close() { r.b.closeRun(r.runID) }

var _ engine.Backend = (*RunBackend)(nil)
