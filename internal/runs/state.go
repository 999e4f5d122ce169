package runs

import (
	"fmt"
	"strings"
)

// State is where a run is in its life. It is the one run-state vocabulary:
// the store persists it, and the CLI, chat, dashboard and IPC show or map
// it at their own edges.
type State string

const (
	Queued  State = "queued"  // accepted, waiting for a run slot
	Running State = "running" // a stage is executing
	Waiting State = "waiting" // blocked on a human gate
	// Interrupted: the host stopped (shutdown or crash) mid-run. Not an
	// end: the run resumes from its checkpoint when a host starts again.
	Interrupted State = "interrupted"
	Succeeded   State = "succeeded"
	Failed      State = "failed"
	// Cancelled: a person or an agent cancelled it. Final; not resumable.
	Cancelled State = "cancelled"
)

// States lists every state, in life-cycle order.
var States = []State{Queued, Running, Waiting, Interrupted, Succeeded, Failed, Cancelled}

// Finished reports whether the state is final (succeeded, failed, cancelled).
func (s State) Finished() bool { return s == Succeeded || s == Failed || s == Cancelled }

// Resumable reports whether a run in this state goes on when it is resumed:
// every unfinished state is (a crash leaves queued, running or waiting runs
// behind; shutdown leaves interrupted ones).
func (s State) Resumable() bool { return !s.Finished() }

// stateAliases are the words older versions stored or printed for the same
// states, accepted where a person types a state.
var stateAliases = map[string]State{
	"success": Succeeded, "completed": Succeeded, "fail": Failed, "waiting_human": Waiting,
}

// ParseState reads a state name as typed on the command line or in a URL
// (case-insensitive; the older words success, fail, completed and
// waiting_human are accepted too).
func ParseState(s string) (State, error) {
	v := strings.ToLower(strings.TrimSpace(s))
	for _, st := range States {
		if string(st) == v {
			return st, nil
		}
	}
	if st, ok := stateAliases[v]; ok {
		return st, nil
	}
	names := make([]string, len(States))
	for i, st := range States {
		names[i] = string(st)
	}
	return "", fmt.Errorf("unknown run state %q (want one of %s)", s, strings.Join(names, ", "))
}

// GateState is where a human gate is: open until answered, timed out or
// withdrawn; those three are final for that posting of the gate.
type GateState string

const (
	GateOpen     GateState = "open"
	GateAnswered GateState = "answered"
	// GateTimedOut: nobody answered within the node's timeout; the engine
	// took human.default_choice (or retried).
	GateTimedOut GateState = "timed_out"
	// GateWithdrawn: the prompt stopped counting before anyone answered —
	// its run stopped (cancelled, or interrupted: it asks again when it
	// resumes) or a newer posting of the same gate replaced it.
	GateWithdrawn GateState = "withdrawn"
)

// GateNote is why a posting was withdrawn, when its prompt says more than
// the usual words ("" for those); runlog words it.
type GateNote string

const (
	// NoteSuperseded: a newer posting of the gate (after a restart) replaced it.
	NoteSuperseded GateNote = "superseded"
	// NoteCancelled: the run was cancelled before anyone answered.
	NoteCancelled GateNote = "cancelled"
	// NoteHostStopped: the host stopped before anyone answered; the run asks
	// again when it resumes.
	NoteHostStopped GateNote = "host_stopped"
)

// Verbosity is how much of a run is told in its chat thread (host
// document, "Verbosity Levels"). The zero value means "not given".
type Verbosity string

const (
	// VerbosityMinimal tells the start, the end and errors (~3-5 messages).
	VerbosityMinimal Verbosity = "minimal"
	// VerbosityStandard adds every stage start and end, routing decisions
	// on conditional edges and retries (~10-15 messages).
	VerbosityStandard Verbosity = "standard"
	// VerbosityVerbose adds agent responses, context updates and
	// checkpoints (~20-30 messages).
	VerbosityVerbose Verbosity = "verbose"
)

// DefaultVerbosity is used when a run does not say.
const DefaultVerbosity = VerbosityStandard

// ParseVerbosity reads a verbosity name case-insensitively; "" yields "".
func ParseVerbosity(s string) (Verbosity, error) {
	switch v := Verbosity(strings.ToLower(strings.TrimSpace(s))); v {
	case "", VerbosityMinimal, VerbosityStandard, VerbosityVerbose:
		return v, nil
	}
	return "", fmt.Errorf("unknown verbosity %q (want minimal, standard or verbose)", s)
}

// OrDefault returns v, or DefaultVerbosity when v is empty.
func (v Verbosity) OrDefault() Verbosity {
	if v == "" {
		return DefaultVerbosity
	}
	return v
}

// AtLeast reports whether v (defaulted) shows everything level shows.
func (v Verbosity) AtLeast(level Verbosity) bool {
	return v.OrDefault().rank() >= level.OrDefault().rank()
}

func (v Verbosity) rank() int {
	switch v {
	case VerbosityMinimal:
		return 0
	case VerbosityVerbose:
		return 2
	}
	return 1
}
