// Package channels is the seam between the host and the chat systems people
// talk to it through (Slack, a terminal console). A Channel delivers what
// people say (messages, mentions, /pipeline commands, gate answers) to the
// host and posts what the host has to say (run threads, status cards, gate
// prompts). Messages are channel-neutral: each channel renders the structured
// parts its own way, so nothing above this package knows about Block Kit.
package channels

import (
	"context"
	"strings"
	"time"

	"nanohost/internal/pipeline/engine"
)

// Channel is one chat system the host is connected to.
type Channel interface {
	// Name identifies the channel ("slack", "console") in logs and in the
	// gate book, so answers are routed back to the channel that asked.
	Name() string
	// Owns reports whether a chat id belongs to this channel.
	Owns(chat string) bool
	// Run connects and delivers inbound events until ctx ends. deliver is
	// called from one goroutine, in arrival order; it may block (the
	// channel keeps acknowledging its transport meanwhile).
	Run(ctx context.Context, deliver func(Inbound)) error
	// Post posts m in chat, as a reply in thread when thread is not empty,
	// and returns the new message's id (Slack: its ts).
	Post(ctx context.Context, chat, thread string, m Message) (msgID string, err error)
	// Update replaces the content of a message posted earlier.
	Update(ctx context.Context, chat, msgID string, m Message) error
	// Ephemeral shows text to one user only (refusals, diagnostics, help).
	Ephemeral(ctx context.Context, chat, user, text string) error
}

// ThreadEphemeral is implemented by channels that can show a reply to one
// user inside a thread: someone who clicked a gate button in a run's
// thread (on a phone, the only place they are looking) sees the answer
// there rather than in the channel.
type ThreadEphemeral interface {
	EphemeralInThread(ctx context.Context, chat, thread, user, text string) error
}

// Tell shows text to user alone: in thread when there is one and the
// channel can, else in the chat.
func Tell(ctx context.Context, ch Channel, chat, thread, user, text string) error {
	if te, ok := ch.(ThreadEphemeral); ok && thread != "" {
		return te.EphemeralInThread(ctx, chat, thread, user, text)
	}
	return ch.Ephemeral(ctx, chat, user, text)
}

// GateAuthorizer is implemented by channels that decide who may answer a
// gate. A channel that does not implement it cannot have its gates answered
// (deny by default).
type GateAuthorizer interface {
	// AuthorizeGateAnswer returns nil when user may answer g, or an error
	// whose text tells the user why not (it is shown to them).
	AuthorizeGateAnswer(ctx context.Context, user string, g GateRef) error
}

// UserNamer is implemented by channels that can show a user's name (for
// "already answered by Ana"); without it the user id is shown.
type UserNamer interface {
	UserName(ctx context.Context, user string) string
}

// ConnStater is implemented by channels whose connection can be down (Slack),
// for health checks: "connected", "connecting", "disconnected", "invalid_auth".
type ConnStater interface {
	ConnState() string
}

// GateRef is what an authorizer needs to know about a gate.
type GateRef struct {
	RunID  string
	GateID string
	Chat   string
	// Approvers is the node's approvers attribute ("U1,group:S2"), "" for none.
	Approvers string
	// StartedBy is the user who started the run (for prevent_self_approval).
	StartedBy string
	Choice    string
}

// InboundKind says what a person did.
type InboundKind string

const (
	// KindMessage is a plain message in a registered chat or a run thread.
	KindMessage InboundKind = "message"
	// KindMention is a message addressed to the bot (@nanohost …).
	KindMention InboundKind = "mention"
	// KindCommand is a parsed /pipeline command (never a parse error nor
	// help: the channel answers those itself).
	KindCommand InboundKind = "command"
	// KindGateAnswer is a click on a gate button or a key typed at a gate.
	KindGateAnswer InboundKind = "gate_answer"
)

// Inbound is one thing a person did, as delivered to the host.
type Inbound struct {
	Kind InboundKind
	// Channel is the Name() of the channel it came through.
	Channel string
	Chat    string
	// Thread is the thread the message was posted in ("" at top level).
	Thread string
	User   string
	Text   string
	// Command is set for KindCommand.
	Command *Command
	// Gate is set for KindGateAnswer.
	Gate *GateAnswer
	// MsgID is the message itself (for gate answers: the gate prompt clicked).
	MsgID string
	// EventID identifies the transport event (Slack event id / envelope id).
	EventID string
	At      time.Time
}

// GateAnswer is an answer to a gate prompt: a choice key, or free text for
// a freeform gate. Nonce ties it to one posting of the gate, so a button of
// an older prompt or another run can never answer this one.
type GateAnswer struct {
	RunID  string
	GateID string
	Nonce  string
	Choice string
	Text   string
	// Option names the chosen option by its 1-based position in the
	// question (a button carries it: unambiguous, and short whatever the
	// label); 0 when the answer is Choice or Text.
	Option int
}

// Message is what the host posts. Text is plain text (never markup: each
// channel escapes it for its own format); the optional parts are rendered
// richly where the channel can (Block Kit on Slack, lines on the console).
type Message struct {
	Text string
	// Detail is a long plain-text body shown under Text (agent output);
	// channels truncate it to their limits and say where the full text is.
	Detail string
	// LogRef says where the full text lives (a path under the run's logs),
	// for the truncation note.
	LogRef string
	// RunID and Seq name the run event the message reports (Seq 0: none).
	// A channel that cannot tell whether a post landed (its answer was
	// lost) looks for a message with them before posting it again.
	RunID string
	Seq   int64

	Card     *StatusCard
	Gate     *GatePrompt
	Resolved *GateResolution
}

// RunState is a run's state as shown on its status card.
type RunState string

const (
	RunRunning   RunState = "running"
	RunWaiting   RunState = "waiting" // a gate is waiting for a human
	RunSucceeded RunState = "succeeded"
	RunFailed    RunState = "failed"
	RunCancelled RunState = "cancelled"
	// RunInterrupted: the host stopped mid-run; the run resumes from its
	// checkpoint when the host starts again.
	RunInterrupted RunState = "interrupted"
)

// StatusCard is a run's root message, edited in place as the run goes.
type StatusCard struct {
	RunID    string
	Pipeline string
	Goal     string
	State    RunState
	// Current is the display name of the stage running now.
	Current string
	// Index is the current stage's 1-based position, Total the number of
	// stages (0 when unknown).
	Index, Total int
	Elapsed      time.Duration
	// LastOutcome is e.g. "✓ Implement — 2m 30s".
	LastOutcome string
	// CostUSD is the cost so far (0 when unknown).
	CostUSD float64
	// Reason is the failure reason once the run failed.
	Reason string
}

// GatePrompt asks a human to choose. RunID, GateID and Nonce are encoded in
// every button so an answer can be matched to exactly this prompt.
type GatePrompt struct {
	RunID    string
	GateID   string
	Nonce    string
	Question engine.Question
	// Links help decide (the run's changes since it started, on the
	// dashboard); channels show them under the question.
	Links []Link
}

// Link is a pointer shown with a message: its text, and where it leads
// ("" when there is nowhere to go, e.g. no dashboard).
type Link struct {
	Text string
	URL  string
}

// GateOutcome says how a gate ended.
type GateOutcome string

const (
	GateAnswered  GateOutcome = "answered"
	GateTimedOut  GateOutcome = "timed_out"
	GateWithdrawn GateOutcome = "withdrawn" // run cancelled, host stopping, or superseded
)

// GateResolution replaces a gate prompt once it is settled: who chose what
// and when, with the buttons gone.
type GateResolution struct {
	Prompt  GatePrompt
	Outcome GateOutcome
	By      string // user id
	Choice  string // the option label chosen
	Text    string // free text, for a freeform answer
	At      time.Time
	// Note explains a timeout or a withdrawal.
	Note string
}

// ChoiceValue is the value an option is answered with: its accelerator key,
// or its label when it has no key. Two options can share a key ("Approve"
// and "Abort" both get A); ChoiceValueIn picks a value naming one option.
func ChoiceValue(o engine.Option) string {
	if o.Key != "" {
		return o.Key
	}
	return o.Label
}

// ChoiceValueIn is the value that answers q with its i-th option: the first
// of its key, label and target that names that option alone, as the engine
// matches answers (OptionIndex). Without it, a click on "Abort" would be
// answered "A" and the engine would take "Approve", the first option with
// that key.
func ChoiceValueIn(q engine.Question, i int) string {
	o := q.Options[i]
	for _, v := range []string{o.Key, o.Label, o.To} {
		if j, ok := OptionIndex(q, v); ok && j == i {
			return v
		}
	}
	return ChoiceValue(o) // identical options: any of them is the same choice
}

// FindOption returns the option of q that choice names (see OptionIndex).
func FindOption(q engine.Question, choice string) (engine.Option, bool) {
	if i, ok := OptionIndex(q, choice); ok {
		return q.Options[i], true
	}
	return engine.Option{}, false
}

// OptionIndex returns the position of the option of q that choice names,
// matched exactly as the engine matches an answer: an accelerator key
// (case-insensitively), else a label (its accelerator prefix, case and
// surrounding space ignored), else a target node id; the first match wins.
func OptionIndex(q engine.Question, choice string) (int, bool) {
	v := strings.TrimSpace(choice)
	if v == "" {
		return 0, false
	}
	norm := engine.NormalizeLabel(v)
	for _, match := range []func(engine.Option) bool{
		func(o engine.Option) bool { return strings.EqualFold(o.Key, v) },
		func(o engine.Option) bool { return engine.NormalizeLabel(o.Label) == norm },
		func(o engine.Option) bool { return o.To == v },
		func(o engine.Option) bool { return strings.EqualFold(o.To, v) },
	} {
		for i, o := range q.Options {
			if match(o) {
				return i, true
			}
		}
	}
	return 0, false
}

// KeyShared reports whether more than one option of q has the accelerator
// key key, so typing it would not say which one is meant.
func KeyShared(q engine.Question, key string) bool {
	n := 0
	for _, o := range q.Options {
		if o.Key != "" && strings.EqualFold(o.Key, strings.TrimSpace(key)) {
			n++
		}
	}
	return n > 1
}

// AcceptsText reports whether q takes free text (a freeform question, or
// a freeform edge among its options).
func AcceptsText(q engine.Question) bool {
	if q.Type == engine.QuestionFreeform {
		return true
	}
	for _, o := range q.Options {
		if o.Freeform {
			return true
		}
	}
	return false
}
