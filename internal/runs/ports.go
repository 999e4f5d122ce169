package runs

import (
	"context"

	"nanohost/internal/lease"
	"nanohost/internal/pipeline/engine"
)

// The service's seams: the store it keeps runs and gates in, where it tells
// runs to people, and where their agents run. Each is a small interface;
// the host wires the implementations (internal/store, the chat reporter in
// internal/channels/report, the container runtime).

// Store is the one authority on runs, their events and their gates. Every
// change goes through it first; memory only holds who is waiting on what.
// Lookups of an unknown run or gate return errors wrapping ErrNoSuchRun or
// ErrNoSuchGate; changing a finished run returns one wrapping ErrRunEnded.
type Store interface {
	CreateRun(ctx context.Context, r Run) error
	GetRun(ctx context.Context, id string) (Run, error)
	ListRuns(ctx context.Context, f Filter) (Page, error)
	// UnfinishedRuns are the runs to resume at start-up, oldest first, with
	// their source.
	UnfinishedRuns(ctx context.Context) ([]Run, error)
	UpdateRunStatus(ctx context.Context, id string, s State) error
	FinishRun(ctx context.Context, id string, s State, reason string, usage engine.Usage) error
	SetRunThread(ctx context.Context, id, threadTS string) error

	// AppendEvent stores an event with its Seq; a Seq stored before is
	// ignored (stored=false).
	AppendEvent(ctx context.Context, e engine.Event) (stored bool, err error)
	// Events are a run's events with seq > afterSeq, in order (limit <= 0: all).
	Events(ctx context.Context, runID string, afterSeq int64, limit int) ([]engine.Event, error)
	// SetDelivered moves the run's chat delivery watermark forward.
	SetDelivered(ctx context.Context, runID string, seq int64) error
	// RunsWithUndelivered lists runs whose stored events are not all delivered.
	RunsWithUndelivered(ctx context.Context) ([]string, error)
	// Leases hold the one deliverer of each run's thread (a lease of kind
	// lease.Delivery), and, among replicas, each run's driver.
	lease.Store

	// OpenGate records a posting of a gate (see store.OpenGate): stored is
	// the gate as it stands (already answered before a crash, or this new
	// open posting), previous the open posting it replaced.
	OpenGate(ctx context.Context, g Gate) (stored Gate, previous *Gate, err error)
	SetGateMessage(ctx context.Context, runID, gateID, nonce, msgID string) error
	GetGate(ctx context.Context, runID, gateID string) (Gate, error)
	// AnswerGate and CloseGate are compare-and-sets on the posting nonce:
	// of concurrent settlements exactly one is accepted, from any process.
	AnswerGate(ctx context.Context, runID, gateID, nonce string, option int, answer, by string) (accepted bool, current Gate, err error)
	CloseGate(ctx context.Context, runID, gateID, nonce string, s GateState) (closed bool, current Gate, err error)
	WithdrawOpenGates(ctx context.Context, runID string) (int, error)
	// OpenGatesInChat lists the open gates of a chat's runs, oldest first;
	// with thread, only the run whose thread it is.
	OpenGatesInChat(ctx context.Context, chat, thread string) ([]Gate, error)
	RunGates(ctx context.Context, runID string) ([]Gate, error)
	// OpenGates lists the open gates of all runs.
	OpenGates(ctx context.Context) ([]Gate, error)

	// RequestCancel records that who asked to cancel an unfinished run
	// (the first asker is kept): whichever process drives the run stops it.
	// A finished run returns an error wrapping ErrRunEnded.
	RequestCancel(ctx context.Context, runID, who string) error
	// CancelRequested is who asked to cancel the run ("" for nobody).
	CancelRequested(ctx context.Context, runID string) (who string, err error)
	// CancelsRequested maps every unfinished run someone asked to cancel
	// to who asked.
	CancelsRequested(ctx context.Context) (map[string]string, error)
}

// Wake tells this process that a run changed in the store, maybe through
// another process sharing it (a host replica, a tool): it re-reads what
// it waits on. A wake carries no data — the store is the authority — so a
// spurious or repeated one only costs a read.
type Wake struct {
	Kind   WakeKind
	RunID  string
	GateID string // WakeGate
	Chat   string // WakeMessage
}

// WakeKind says what changed.
type WakeKind string

const (
	WakeGate   WakeKind = "gate"   // a gate of the run was settled
	WakeCancel WakeKind = "cancel" // a cancel of the run was asked
	WakeRun    WakeKind = "run"    // the run's events or state changed
	// WakeMessage: a chat message waits for its group's conversation
	// (Chat set, RunID empty); the runs service ignores it, the host's
	// chat router takes it.
	WakeMessage WakeKind = "message"
	// WakeAll: anything may have changed (the listener reconnected and
	// may have missed wakes): re-read everything.
	WakeAll WakeKind = "all"
)

// Wakeups delivers the store's wakes of changes made by other processes
// (PostgreSQL's LISTEN/NOTIFY). Without it a process learns of them only
// by re-reading the store now and then (Config.GatePoll).
type Wakeups interface {
	// Listen calls fn for every wake until ctx ends (it blocks), keeping
	// its connection to the store up; fn must be quick.
	Listen(ctx context.Context, fn func(Wake))
}

// Progress is how far a run's thread got: its root message and the last
// event delivered there. It is persisted, so a thread opened again after a
// restart continues without repeating anything.
type Progress struct {
	RootID  string `json:"root_id"`
	LastSeq int64  `json:"last_seq"`
}

// Threads opens the places where runs are told to people: a run's chat
// thread — its status card as the root message, its events under it, its
// gates as prompts.
type Threads interface {
	// Serves says whether runs reporting to chat can be told (a channel of
	// this host owns it), or why not.
	Serves(chat string) error
	// Open starts (or, when run.ThreadTS is set, continues) run's thread.
	// name is the pipeline's name for the card. progress is called as
	// delivery moves on, to be persisted; events is how the thread reads
	// what it missed from the store (after a restart, or when it fell
	// behind).
	Open(ctx context.Context, run Run, name string, progress func(Progress), events EventSource) (Thread, error)
}

// EventSource reads a run's stored events with seq > afterSeq, in order.
type EventSource func(ctx context.Context, afterSeq int64) ([]engine.Event, error)

// Thread is one run's thread.
type Thread interface {
	// Tell hands over a stored event (Seq set). It never blocks: a thread
	// that falls behind reads the rest from its EventSource.
	Tell(e engine.Event)
	// Ask posts an open gate's prompt after what was told before it and
	// returns the prompt's message id.
	Ask(ctx context.Context, g Gate) (msgID string, err error)
	// Settle edits the prompt of a settled gate (g.MessageTS) to show how it
	// ended; note says why it was withdrawn when the usual words do not
	// ("" for them).
	Settle(ctx context.Context, g Gate, note GateNote) error
	// Point tells another thread of the run's chat — the conversation the
	// run was asked from — where the run's own thread is.
	Point(ctx context.Context, thread string) error
	// Close delivers what is queued, waiting at most until ctx ends; the
	// thread keeps trying in the background until the host stops.
	Close(ctx context.Context) error
}

// Runtime runs a run's agent work: the engine's backend for one run, bound
// to its group's workspace. Close ends what the run still holds (live agent
// sessions) when it ends.
type Runtime interface {
	ForRun(ctx context.Context, run Run) (RunBackend, error)
}

// RunBackend is a run-scoped engine.Backend.
type RunBackend interface {
	engine.Backend
	Close()
}
