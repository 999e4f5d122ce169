package script

import (
	"context"
	"fmt"
	"time"

	"nanohost/internal/pipeline/engine"
)

// Run answers one execution of req.NodeID: the req.Execution-th response
// (the engine's count, which survives a resume in a new process), or when
// the caller does not set it the script's own count per run and node,
// retries included — not req.Visit, which a retry does not advance; a
// re-ask of a typed output (req.Reask) takes the next responses. It
// waits out the response's delay, then returns its error or result.
func (s *Script) Run(ctx context.Context, req engine.Request) (engine.Result, error) {
	n := s.next(req.RunID, req.NodeID, req.Execution)
	if req.Execution > 0 {
		n += req.Reask // a re-ask takes the responses after its execution's (the own count advances by itself)
	}
	resp, ok := s.Response(req.NodeID, n)
	if !ok {
		resp = Response{Status: string(engine.StatusSuccess), Text: "[Script] " + req.NodeID + " done"}
	}
	if err := wait(ctx, resp.Delay(), req.Timeout, req.NodeID); err != nil {
		return engine.Result{}, err
	}
	if err := resp.Err(); err != nil {
		return engine.Result{}, fmt.Errorf("script: node %s execution %d: %w", req.NodeID, n, err)
	}
	out, err := resp.Outcome()
	if err != nil {
		return engine.Result{}, fmt.Errorf("script: node %s execution %d: %w", req.NodeID, n, err)
	}
	res := engine.Result{Outcome: out, Usage: resp.Usage}
	if req.Kind == engine.KindTool {
		res.ExitCode, res.Output = resp.Exit(), resp.Text
	} else {
		res.Text = resp.Text
	}
	return res, nil
}

// wait sleeps for d, returning early with ctx's error when the run is
// cancelled, or with a timeout error when the node's timeout is shorter.
func wait(ctx context.Context, d, timeout time.Duration, nodeID string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d <= 0 {
		return nil
	}
	var deadline <-chan time.Time
	if timeout > 0 && timeout < d {
		t := time.NewTimer(timeout)
		defer t.Stop()
		deadline = t.C
	}
	sleep := time.NewTimer(d)
	defer sleep.Stop()
	select {
	case <-sleep.C:
		return nil
	case <-deadline:
		return fmt.Errorf("script: node %s timed out after %s: %w", nodeID, timeout, context.DeadlineExceeded)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Sim is the spec's simulation mode (§4.5 with no backend): every codergen
// node answers "[Simulated] Response for stage: <id>" with success, every
// tool node exits 0. An engine running it declares engine.Config.Simulated
// (its stages keep no files).
type Sim struct{}

// Run answers req without doing anything.
func (Sim) Run(ctx context.Context, req engine.Request) (engine.Result, error) {
	if err := ctx.Err(); err != nil {
		return engine.Result{}, err
	}
	text := "[Simulated] Response for stage: " + req.NodeID
	res := engine.Result{Outcome: &engine.Outcome{Status: engine.StatusSuccess, Notes: "Stage completed: " + req.NodeID}}
	if req.Kind == engine.KindTool {
		res.Output = text
	} else {
		res.Text = text
	}
	return res, nil
}
