package engine

import (
	"context"
	"errors"
	"fmt"
	"syscall"
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

// CancellationOf returns the Cancellation that stopped ctx (through
// Cancel), if one did: the engine and whoever launched the run tell a
// cancel from a shutdown the same way.
func CancellationOf(ctx context.Context) (*Cancellation, bool) {
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

// RecordError is why a run stops, interrupted and waiting for the host,
// when its progress cannot be made durable: a write to its journal (or the
// host's store) failed — the disk is full, read-only or failing. It names
// what to free; the run goes on from its last recorded step once that is
// done (a resume, or the host's next start).
type RecordError struct {
	Root string // the run's directory, whose disk to free ("" when unknown)
	Err  error
}

func (e *RecordError) Error() string {
	where := "the disk holding the host's data directory"
	if e.Root != "" {
		where = "the disk holding " + e.Root
	}
	return fmt.Sprintf("cannot record the run's progress (%v): free space on %s, and the run goes on from its last recorded step", e.Err, where)
}

func (e *RecordError) Unwrap() error { return e.Err }

// WaitForHost stops the run behind cancel, interrupted and waiting for the
// host because of err (a *RecordError, a HostError): a surface that records
// the run's events and cannot (the host's store) stops it this way.
func WaitForHost(cancel context.CancelCauseFunc, err error) { cancel(&hostWait{err: err}) }

// diskFailed reports whether err is the disk refusing a write — full, over
// quota, read-only or failing — rather than anything the run did.
func diskFailed(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) ||
		errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.EIO)
}
