package engine

import (
	"context"
	"errors"
)

// A run stops before its end when its context is cancelled. The cause says
// how it stopped, and the run ends differently:
//
//   - cancelled with a *Cancellation (Cancel): a person or an agent cancelled
//     it. The run ends with PipelineCancelled and RunResult.Cancelled; its
//     host does not resume it.
//   - cancelled any other way (the host shutting down, Ctrl-C, a plain
//     context cancel or deadline): the run is interrupted. Its checkpoint
//     keeps its place, it ends with PipelineInterrupted and
//     RunResult.Interrupted, and it resumes from there.
//   - stopped by a stage whose handler returned a HostError (the agent
//     image is missing, Docker or the cluster is down): the run is
//     interrupted the same way — waiting for the host — and its
//     PipelineInterrupted says why (Data[DataWaitingForHost]), so a person
//     can fix it; it resumes at that stage.

// Cancellation is the cancel cause of a run someone cancelled.
type Cancellation struct {
	// By is who cancelled it, as recorded ("U123", "web:ana", "agent:main").
	By string
}

func (c *Cancellation) Error() string {
	if c.By == "" {
		return "cancelled"
	}
	return "cancelled by " + c.By
}

// Cancel stops the run behind cancel as cancelled by by (it is not resumed).
func Cancel(cancel context.CancelCauseFunc, by string) { cancel(&Cancellation{By: by}) }

// cancellation returns the Cancellation that stopped ctx, if one did.
func cancellation(ctx context.Context) (*Cancellation, bool) {
	var c *Cancellation
	if errors.As(context.Cause(ctx), &c) {
		return c, true
	}
	return nil, false
}

// DataWaitingForHost is the PipelineInterrupted Data key holding why a run
// waits for the host (a HostError's text); absent when the host stopped.
const DataWaitingForHost = "waiting_for_host"

// hostWait is the cancel cause of a run stopped by a HostError.
type hostWait struct{ err error }

func (h *hostWait) Error() string { return "waiting for the host: " + h.err.Error() }

// waitingForHost returns the HostError that stopped ctx's run, if one did.
func waitingForHost(ctx context.Context) (error, bool) {
	var h *hostWait
	if errors.As(context.Cause(ctx), &h) {
		return h.err, true
	}
	return nil, false
}
