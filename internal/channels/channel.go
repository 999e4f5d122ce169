// Package channels is the seam between the host and the chat systems people
// talk to it through (Slack, a terminal console). A Channel is a transport:
// it delivers what people say (messages, mentions, /pipeline commands, gate
// answers) and posts what the host has to say (run threads, status cards,
// gate prompts). Messages are channel-neutral: each channel renders the
// structured parts its own way, so nothing above this package knows about
// Block Kit. Who may do what is not a transport's business: each endpoint's
// runs.Policy comes from configuration.
package channels

import (
	"context"
	"strings"
	"time"

	"nanohost/internal/runlog"
	"nanohost/internal/runs"
)

// Channel is one chat system the host is connected to.
type Channel interface {
	// Name identifies the channel ("slack", "console") in logs; it is also
	// the endpoint whose runs.Policy applies to what it delivers.
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
	// Ephemeral shows text to one user only (refusals, diagnostics, help):
	// inside thread when there is one and the transport can show replies
	// there (someone who clicked a button in a run's thread, on a phone, is
	// looking there), else in the chat.
	Ephemeral(ctx context.Context, chat, thread, user, text string) error
	// Capabilities says what else the transport can do.
	Capabilities() Capabilities
}

// Capabilities are what a transport declares it can do beyond the basics.
// A nil function is a capability the transport does not have.
type Capabilities struct {
	// UserName shows a user id as people know them ("Ana"); without it
	// the id is shown.
	UserName func(ctx context.Context, user string) string
	// Connection reports the transport's connection right now, for health
	// checks and metrics; without it the channel is connected while Run
	// runs.
	Connection func() Connection
	// TypedAnswers: a line typed on its own that names a choice answers
	// the chat's one waiting question (the console, one person's
	// terminal). Without it only buttons, thread replies and /pipeline
	// answer do: in a shared chat, chatter must never approve anything.
	TypedAnswers bool
}

// Connection is a transport's connection state.
type Connection string

const (
	Connected    Connection = "connected"
	Connecting   Connection = "connecting"
	Disconnected Connection = "disconnected"
	// InvalidAuth: the chat system refused the credentials; Run has returned.
	InvalidAuth Connection = "invalid_auth"
	// MissingScope: a credential lacks a permission nanohost needs (Slack:
	// a token scope); what needs it cannot work until the app is reinstalled.
	MissingScope Connection = "missing_scope"
	// LinkDisabled: the chat system has the connection turned off (Slack:
	// Socket Mode off in the app's settings); Run keeps trying.
	LinkDisabled Connection = "link_disabled"
)

// UserName is how ch shows user to people: its name when ch can tell,
// else the id itself.
func UserName(ctx context.Context, ch Channel, user string) string {
	if names := ch.Capabilities().UserName; names != nil {
		if name := names(ctx, user); name != "" {
			return name
		}
	}
	return user
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
	// Gate is set for KindGateAnswer: the posting answered (its nonce)
	// and the option chosen.
	Gate *runs.GateAnswer
	// MsgID is the message itself (for gate answers: the gate prompt clicked).
	MsgID string
	// EventID identifies the transport event (Slack event id / envelope id).
	EventID string
	At      time.Time
}

// Who is the principal behind an inbound event: the user, through this
// channel, from this chat.
func (in Inbound) Who() runs.Principal {
	return runs.Principal{Endpoint: in.Channel, User: in.User, Chat: in.Chat}
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
	// MayHaveLanded marks a post another process may have made already
	// (it died between posting and recording the post): a channel that
	// can tell looks for it first, and does not post it twice.
	MayHaveLanded bool
	// AnswerTo names the message (its MsgID) an agent's chat reply
	// answers: the reply posted again — by a process that took over
	// a message another answered and died before recording it — is
	// the same post, which a channel that can tell looks for first
	// (with MayHaveLanded) and does not post twice.
	AnswerTo string

	// Card is a run's status card (its thread's root message).
	Card *runlog.Card
	// Gate is an open gate's prompt: its choices as buttons, each carrying
	// the gate's run, id, nonce and the option's position.
	Gate *runs.Gate
	// Resolved replaces a gate's prompt once it is settled: who chose what
	// and when (By is the user id; the channel shows it its own way).
	Resolved *runlog.Resolution
	// Links help the reader decide (a gate's run's changes since it
	// started, on the dashboard); channels show them under the message.
	Links []Link
}

// Link is a pointer shown with a message: its text, and where it leads
// ("" when there is nowhere to go, e.g. no dashboard).
type Link struct {
	Text string
	URL  string
}

// LinksText is links as plain lines under a message, for transports
// without rich text.
func LinksText(links []Link) string {
	var b strings.Builder
	for _, l := range links {
		b.WriteString("\n   " + l.Text)
		if l.URL != "" {
			b.WriteString(": " + l.URL)
		}
	}
	return b.String()
}
