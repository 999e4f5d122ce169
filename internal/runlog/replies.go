package runlog

import (
	"errors"
	"fmt"
	"strings"

	"nanohost/internal/runs"
)

// The marks a reply starts with: done, refused. Channels show them as
// written (Slack only marks up the text around them).
const (
	MarkDone    = "✓"
	MarkRefused = "✗"
)

// Done words something that was done: "✓ text".
func Done(text string) string { return MarkDone + " " + text }

// Refused words a refusal: "✗ text".
func Refused(text string) string { return MarkRefused + " " + text }

// AlreadyAnswered words an answer that came after another: who (as the
// reader knows them) answered what first, and when — "…answered by
// Ana: [A] Approve (14:03 UTC)".
func AlreadyAnswered(g runs.Gate, who string) string {
	return fmt.Sprintf("already answered by %s: %s (%s)", who, g.ChosenLabel(), g.AnsweredAt.UTC().Format("15:04 UTC"))
}

// Settled words the refusal of an answer to a gate that was settled
// already: answered first by someone (named as the reader knows them),
// timed out, or withdrawn.
func Settled(g runs.Gate, who string) string {
	switch g.Status {
	case runs.GateTimedOut:
		return "this gate already timed out"
	case runs.GateWithdrawn:
		return "that prompt is no longer active"
	}
	return AlreadyAnswered(g, who)
}

// AnswerRefusal is what a person is told when their answer is refused;
// name shows a user id as the reader knows them.
func AnswerRefusal(err error, name func(user string) string) string {
	var settled *runs.SettledError
	switch {
	case errors.As(err, &settled):
		return Sentence(Settled(settled.Gate, name(settled.Gate.AnsweredBy)))
	case errors.Is(err, runs.ErrNoSuchGate):
		return "That prompt is no longer active."
	case errors.Is(err, runs.ErrStaleGate):
		return "That button belongs to an older prompt for this gate; it no longer answers anything. Use the latest prompt in the thread."
	case errors.Is(err, runs.ErrNotAllowed), errors.Is(err, runs.ErrInvalidAnswer):
		// The policy's or the gate's own words, as they wrote them.
		return strings.TrimPrefix(strings.TrimPrefix(err.Error(), runs.ErrNotAllowed.Error()+": "), runs.ErrInvalidAnswer.Error()+": ")
	}
	return "Your answer could not be recorded; please try again."
}

// Answered confirms an answer given by command: "✓ Run 1a2b3c4d: answered
// [A] Approve."
func Answered(g runs.Gate) string {
	return Done(fmt.Sprintf("Run %s: answered %s.", runs.ShortID(g.RunID), g.ChosenLabel()))
}

// NotWaiting refuses an answer to a run with no open gate.
func NotWaiting(run runs.Run) string {
	return Refused(fmt.Sprintf("Run %s is not waiting for an answer: it is %s.", runs.ShortID(run.ID), StateWord(run.Status)))
}

// Sentence capitalises s and ends it with a full stop.
func Sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return s
	}
	s = strings.ToUpper(s[:1]) + s[1:]
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}

// RunList lists the pipelines a group can run by name and its recent runs
// (err: why they could not be read), each with its short id and state.
func RunList(stored []string, recent []runs.Run, err error) string {
	var b strings.Builder
	if len(stored) > 0 {
		b.WriteString("Stored pipelines (/pipeline run <name>): " + strings.Join(stored, ", ") + "\n")
	} else {
		b.WriteString("No stored pipelines: put a <name>.dot in the group's workspace to run it with /pipeline run <name>.\n")
	}
	switch {
	case err != nil:
		b.WriteString(Refused(err.Error()))
	case len(recent) == 0:
		b.WriteString("No runs yet. Start one with /pipeline run <name> or /pipeline <DOT>.")
	default:
		b.WriteString("Recent runs:")
		for _, r := range recent {
			fmt.Fprintf(&b, "\n  %-8s %-13s %s", runs.ShortID(r.ID), StateWord(r.Status), RunLabel(r))
		}
	}
	return b.String()
}

// RunLabel is what a run is about, for a list: its goal, else its file.
func RunLabel(r runs.Run) string {
	if r.Goal != "" {
		return r.Goal
	}
	return r.FileName
}

// RunStatus is a run's state, where it is, what it finished, why it
// failed, and the questions it waits on with how to answer them (typed:
// the channel takes typed answers); link points at its dashboard page
// ("" for none).
func RunStatus(st runs.Status, typed bool, link string) string {
	text := fmt.Sprintf("Run %s: %s", runs.ShortID(st.Run.ID), StateWord(st.Run.Status))
	if label := RunLabel(st.Run); label != "" {
		text += " — " + label
	}
	if st.Current != "" && !st.Run.Status.Finished() {
		text += " — at " + st.Current
	}
	if len(st.Completed) > 0 {
		text += " — done: " + strings.Join(st.Completed, ", ")
	}
	if st.Run.FailureReason != "" {
		text += " — " + st.Run.FailureReason
	}
	for _, gate := range st.Gates {
		text += "\n" + PromptWithHint(gate.RunID, gate.Question(), typed)
	}
	return text + DashboardLine(link)
}

// StartedElsewhere tells the conversation a run was asked from that the
// run's story is in its own thread: a run is always told in one thread.
func StartedElsewhere(pipeline, runID string) string {
	if pipeline == "" {
		pipeline = "the pipeline"
	}
	return fmt.Sprintf("Started %s (run %s); its progress is in the run's own thread.", pipeline, runs.ShortID(runID))
}

// Resuming says a run goes on from its checkpoint (link: its dashboard
// page, "" for none).
func Resuming(runID, link string) string {
	return "Resuming run " + runs.ShortID(runID) + " from its checkpoint …" + DashboardLine(link)
}

// DashboardLine is the line pointing at a run's dashboard page ("" for
// no page).
func DashboardLine(url string) string {
	if url == "" {
		return ""
	}
	return "\nDashboard: " + url
}

// NotRegistered answers a command in a chat that is no group's.
func NotRegistered(chat string) string {
	return "This chat is not registered with nanohost; the main group can add it with /register " + chat + " <folder>."
}

// UseTheButtons answers a thread reply that names a choice of a gate
// answered only by its buttons.
const UseTheButtons = "A reply in the thread does not answer this gate; use its buttons."

// SharedKey answers a typed answer that is the key of more than one choice.
func SharedKey(key string) string {
	return key + " is the key of more than one choice: type the choice's name."
}

// NotEnabledHere answers a command in a Slack channel outside
// slack.policy.channels.
func NotEnabledHere(channelID string) string {
	return "nanohost is not enabled in this channel. An admin can add its id (" + channelID + ") to slack.policy.channels."
}

// The dashboard's sign-in refusals.
const (
	LoginUnreadable = "The form could not be read; try again."
	LoginWrongToken = "That token is not the host's http.token."
)

// The replies to /register <chat> <folder> [trigger].
const (
	RegisterNotMain = "Only the main group's chat may register groups."
	RegisterUsage   = "Usage: /register <chat> <folder> [trigger]  — e.g. /register slack:C0123ABC team-web nano"
)

// RegisterNotAChannel refuses a chat that names no channel.
func RegisterNotAChannel(chat string) string {
	return fmt.Sprintf("%q does not name a channel: use slack:<channel id> or console:<name>.", chat)
}

// RegisterConflict refuses a registration that clashes with a group.
func RegisterConflict(c RegisterClash) string {
	return Refused("Not registered, nothing changed: " + c.Text())
}

// RegisterClash is why registering Chat as group Folder would clash with
// the groups that exist (the host finds it; this words it).
type RegisterClash struct {
	Chat, Folder string
	// Invalid is why Folder is no group name.
	Invalid error
	// ChatOwner is the group Chat belongs to already; Console says Chat is
	// the console, a single chat.
	ChatOwner string
	Console   bool
	// FolderChat is the chat of the group named Folder already.
	FolderChat string
}

// Text says why, and what to do instead.
func (c RegisterClash) Text() string {
	switch {
	case c.Invalid != nil:
		return c.Invalid.Error() + "."
	case c.ChatOwner != "" && c.Console:
		return fmt.Sprintf("the console is a single chat, and it already belongs to group %s: a chat belongs to one group. Register a Slack channel (/register slack:<channel id> %s) instead.", c.ChatOwner, c.Folder)
	case c.ChatOwner != "":
		return fmt.Sprintf("chat %s already belongs to group %s: a chat belongs to one group. Pick another chat, or change group %s in the configuration.", c.Chat, c.ChatOwner, c.ChatOwner)
	}
	return fmt.Sprintf("a group named %s already exists (its chat is %s): choose another folder name.", c.Folder, c.FolderChat)
}

// RegisterFailed says the registration could not be stored.
func RegisterFailed(why string) string { return Refused("Could not register the group: " + why) }

// RegisterReloadFailed says the group was stored but not taken up.
func RegisterReloadFailed(why string) string {
	return "Registered, but reloading groups failed: " + why
}

// Registered confirms a registration.
func Registered(folder, chat string) string {
	return fmt.Sprintf("Registered group %s on %s (workspace data/groups/%s).", folder, chat, folder)
}
