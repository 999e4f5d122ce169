package runlog

import (
	"fmt"
	"strings"
	"time"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runs"
)

// OptionText is an option's label with its accelerator key shown:
// "[A] Approve".
func OptionText(label, key string) string {
	if key == "" || strings.Contains(label, "["+key+"]") || strings.HasPrefix(label, key+")") {
		return label
	}
	return "[" + key + "] " + label
}

// PromptText is a gate prompt as lines: the question, the choices with
// their keys, how to answer with text when a freeform edge exists, and the
// timeout.
func PromptText(q engine.Question) string {
	var b strings.Builder
	b.WriteString("❓ " + q.Text)
	var choices []string
	freeform := ""
	for _, o := range q.Options {
		if o.Freeform {
			freeform = o.Label
			continue
		}
		choices = append(choices, OptionText(o.Label, o.Key))
	}
	if len(choices) > 0 {
		b.WriteString("\n   " + strings.Join(choices, "   "))
	}
	if freeform != "" || (len(choices) == 0 && q.AcceptsText()) {
		b.WriteString("\n   Reply with text to answer")
		if freeform != "" {
			b.WriteString(" " + freeform)
		}
	}
	if q.TimeoutSeconds > 0 {
		b.WriteString("\n   (times out in " + Duration(time.Duration(q.TimeoutSeconds*float64(time.Second))) + ")")
	}
	return b.String()
}

// Resolution says how a gate's posting ended, for the message that
// replaced its prompt: by is who answered, as the reader should see them.
type Resolution struct {
	Question engine.Question
	State    runs.GateState
	By       string
	Choice   string // the chosen option's label
	Answer   string // free text, for a text answer
	At       time.Time
	// Note explains a timeout or a withdrawal.
	Note string
}

// ResolutionOf describes how g ended, showing its answerer as by.
func ResolutionOf(g runs.Gate, by, note string) Resolution {
	r := Resolution{Question: g.Question(), State: g.Status, By: by, At: g.AnsweredAt, Note: note}
	if g.Status == runs.GateAnswered {
		if g.TextAnswer() {
			r.Answer = g.Answer
			if g.Option >= 1 && g.Option <= len(g.Choices) {
				r.Choice = g.Choices[g.Option-1].Label
			}
		} else {
			r.Choice = g.ChosenLabel()
		}
	}
	switch {
	case r.Note != "":
	case g.Status == runs.GateTimedOut:
		r.Note = "Nobody answered in time; the pipeline continues with its default choice."
	case g.Status == runs.GateWithdrawn:
		r.Note = "This prompt is no longer active."
	}
	return r
}

// Text says how the gate ended: "✓ Ana chose Approve at 14:03 UTC".
func (r Resolution) Text() string {
	q := "❓ " + r.Question.Text + "\n"
	switch r.State {
	case runs.GateAnswered:
		what := r.Choice
		if r.Answer != "" {
			what = fmt.Sprintf("%q", r.Answer)
			if r.Choice != "" {
				what = fmt.Sprintf("%s: %q", r.Choice, r.Answer)
			}
		}
		return q + fmt.Sprintf("✓ %s chose %s at %s", r.By, what, r.At.UTC().Format("15:04 UTC"))
	case runs.GateTimedOut:
		return q + "⌛ Timed out. " + r.Note
	}
	return q + "⊘ " + r.Note
}
