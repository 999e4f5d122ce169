package runlog

import (
	"fmt"
	"time"
)

// The pieces of words a channel that marks text up (Slack's blocks) lays
// out itself: the sentences are here, the channel only marks up the parts
// it is given (names, labels, lists) before passing them in.

// Field is one labelled part of a status card, for a channel that lays a
// card out in fields: its title and its text.
type Field struct{ Title, Text string }

// Fields are the card's parts under its title — its state, the stage, the
// time, the last outcome, the cost and why it stopped — those it has.
func (c Card) Fields() []Field {
	fields := []Field{{"Status", StateText(c.State)}}
	if c.Current != "" {
		fields = append(fields, Field{"Stage", Progress(c.Current, c.Index, c.Total)})
	}
	fields = append(fields, Field{"Elapsed", Duration(c.Elapsed)})
	if c.LastOutcome != "" {
		fields = append(fields, Field{"Last", c.LastOutcome})
	}
	if cost := c.Cost(); cost != "" {
		fields = append(fields, Field{"Cost", cost})
	}
	if c.Reason != "" {
		fields = append(fields, Field{"Reason", c.Reason})
	}
	return fields
}

// GoalLine is the card's goal ("" for none).
func (c Card) GoalLine() string {
	if c.Goal == "" {
		return ""
	}
	return "Goal: " + c.Goal
}

// CardFooter ends a card's footer: after the run's id (RunRef) and its
// links.
const CardFooter = "details in this thread"

// RunRef names a run by its id, marked up by the channel: "run `3f9a1c`".
func RunRef(markedID string) string { return "run " + markedID }

// ReplyToAnswer is the hint on a prompt answered by a reply in its thread;
// freeform is the free-text choice's label as the channel shows it ("" for
// none).
func ReplyToAnswer(freeform string) string {
	hint := "Reply in this thread with text to answer"
	if freeform != "" {
		hint += " " + freeform
	}
	return hint + "."
}

// TimesOutIn says when a prompt times out.
func TimesOutIn(d time.Duration) string { return "Times out in " + Duration(d) + "." }

// Approvers says who may answer a prompt (the list as the channel shows it).
func Approvers(list string) string { return "Approvers: " + list + "." }

// AndMore ends a list cut short of n of its entries.
func AndMore(n int) string { return fmt.Sprintf("and %d more", n) }

// ChoiceN names an option with no text to show by its 1-based position.
func ChoiceN(n int) string { return fmt.Sprintf("Choice %d", n) }

// SettledChoices replaces a follow-up page of a settled prompt's buttons.
const SettledChoices = "These choices belong to the prompt above, which is settled."

// Chose says who answered a prompt with what, and when (who and what as
// the channel shows them).
func Chose(who, what string, at time.Time) string {
	return Done(fmt.Sprintf("%s chose %s · %s", who, what, at.UTC().Format("2006-01-02 15:04 UTC")))
}

// TimedOut is a timed-out prompt's line, with its note.
func TimedOut(note string) string { return "⌛ Timed out. " + note }

// Withdrawn is a withdrawn prompt's line, with its note.
func Withdrawn(note string) string { return "⊘ " + note }

// TheRunsLogs is where the whole of a text cut short in chat is.
const TheRunsLogs = "the run's logs"

// TruncatedNote follows a text cut short: where the rest is.
func TruncatedNote(where string) string {
	return "\n… (truncated; the full text is in " + where + ")"
}
