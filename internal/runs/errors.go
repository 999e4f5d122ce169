package runs

import (
	"errors"
	"fmt"
)

// Errors the service's calls return (wrapped with what they are about).
// Each is a refusal the caller shows: the chat tells the person, the web
// maps it to an HTTP status, IPC answers the agent with it.
var (
	// ErrNoSuchRun: no run has that id (404).
	ErrNoSuchRun = errors.New("no such run")
	// ErrAmbiguousRun: the id typed is the start of more than one run's
	// id (400); the error lists them.
	ErrAmbiguousRun = errors.New("more than one run matches")
	// ErrNoSuchGate: the run has no gate with that id (404).
	ErrNoSuchGate = errors.New("no such gate")
	// ErrStaleGate: the answer is for an older posting of the gate (a
	// button from before a restart); the latest prompt is the one that
	// counts (409).
	ErrStaleGate = errors.New("that answer is for an older posting of this gate")
	// ErrNotAllowed: the endpoint's policy refuses (403).
	ErrNotAllowed = errors.New("not allowed")
	// ErrInvalidAnswer: the answer does not fit the gate (422).
	ErrInvalidAnswer = errors.New("not an answer to this gate")
	// ErrSettled: the gate was settled already (409); errors.As with
	// *SettledError tells how.
	ErrSettled = errors.New("gate already settled")
	// ErrRunEnded: the run already ended; it cannot be changed (409).
	ErrRunEnded = errors.New("run already ended")
	// ErrRunActive: the run is being executed already (409).
	ErrRunActive = errors.New("run is running")
	// ErrStopping: the host is shutting down and takes no new work (503).
	ErrStopping = errors.New("the host is shutting down")
)

// SettledError is the refusal of an answer to a gate that was already
// settled: it carries the gate as it stands (who answered what, and when),
// for runlog.Settled to word.
type SettledError struct{ Gate Gate }

func (e *SettledError) Error() string {
	g := e.Gate
	switch g.Status {
	case GateAnswered:
		return fmt.Sprintf("gate %s of run %s was answered first, by %s: %s", g.GateID, g.RunID, g.AnsweredBy, g.ChosenLabel())
	case GateTimedOut:
		return fmt.Sprintf("gate %s of run %s already timed out", g.GateID, g.RunID)
	}
	return fmt.Sprintf("gate %s of run %s is no longer active", g.GateID, g.RunID)
}

// EndedError refuses a change to a run that has ended: it names the run and
// how it ended, and errors.Is(err, ErrRunEnded) holds.
type EndedError struct {
	RunID  string
	Status State
	// Hint says what to do instead, "" for nothing.
	Hint string
}

func (e *EndedError) Error() string {
	msg := fmt.Sprintf("run %s already ended as %s", e.RunID, e.Status)
	if e.Hint != "" {
		msg += "; " + e.Hint
	}
	return msg
}

// Is makes errors.Is(err, ErrRunEnded) true.
func (e *EndedError) Is(target error) bool { return target == ErrRunEnded }

// Is makes errors.Is(err, ErrSettled) true.
func (e *SettledError) Is(target error) bool { return target == ErrSettled }
