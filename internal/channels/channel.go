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
// or its label when it has no key.
func ChoiceValue(o engine.Option) string {
	if o.Key != "" {
		return o.Key
	}
	return o.Label
}

// FindOption returns the option of q whose choice value (or label, or
// target) matches choice, case-insensitively for keys.
func FindOption(q engine.Question, choice string) (engine.Option, bool) {
	for _, o := range q.Options {
		if o.Key != "" && strings.EqualFold(o.Key, choice) {
			return o, true
		}
	}
	for _, o := range q.Options {
		if o.Label == choice || o.To == choice {
			return o, true
		}
	}
	return engine.Option{}, false
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
