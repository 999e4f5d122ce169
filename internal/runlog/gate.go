package runlog

import (
	"cmp"
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

// QuestionText is a gate's question for people: its prompt, preceded on a
// re-ask (q.Unmatched set) by why it is asked again —
// `"maybe" matches none of the options ([A] Approve, [F] Fix). Review it`.
// Every surface that shows a question's text shows this.
func QuestionText(q engine.Question) string {
	if q.Unmatched == "" {
		return q.Text
	}
	return fmt.Sprintf("%q matches none of the options (%s). %s", q.Unmatched, optionList(q.Options), q.Text)
}

// Asked is how a prompt opens: the question mark and the question
// (QuestionText).
func Asked(q engine.Question) string { return "❓ " + QuestionText(q) }

// AskedPage opens a follow-up page of a prompt whose choices fill several
// messages: question (the question, shortened as the channel needs) and
// which of the total choices the page holds (first and last, 1-based).
func AskedPage(question string, first, last, total int) string {
	return fmt.Sprintf("❓ %s — choices %d–%d of %d", question, first, last, total)
}

// optionList lists every option of a gate as "[A] Approve, [F] Fix".
func optionList(opts []engine.Option) string {
	parts := make([]string, len(opts))
	for i, o := range opts {
		parts[i] = OptionText(engine.NormalizeLabelDisplay(o.Label), o.Key)
	}
	return strings.Join(parts, ", ")
}

// PromptText is a gate prompt as lines: the question, the choices with
// their keys, how to answer with text when a freeform edge exists (a reply
// in the run's thread), and the timeout.
func PromptText(q engine.Question) string {
	how := ""
	if text := textChoice(q); text != "" || (len(choices(q)) == 0 && q.AcceptsText()) {
		how = "Reply with text to answer" + strings.TrimRight(" "+text, " ")
	}
	return promptLines(q, how)
}

// PromptWithHint is a gate prompt that says how to answer it (AnswerHint):
// the question, the choices, the hint and the timeout. The console prints
// its prompts so; /pipeline status shows the question a run waits on so.
func PromptWithHint(runID string, q engine.Question, typed bool) string {
	return promptLines(q, AnswerHint(runID, q, typed))
}

func promptLines(q engine.Question, how string) string {
	var b strings.Builder
	b.WriteString(Asked(q))
	if cs := choices(q); len(cs) > 0 {
		b.WriteString("\n   " + strings.Join(cs, "   "))
	}
	if how != "" {
		b.WriteString("\n   " + how)
	}
	if q.TimeoutSeconds > 0 {
		b.WriteString("\n   (times out in " + Duration(time.Duration(q.TimeoutSeconds*float64(time.Second))) + ")")
	}
	return b.String()
}

// choices are q's options that are answered by choosing them, as shown:
// "[A] Approve".
func choices(q engine.Question) []string {
	var out []string
	for _, o := range q.Options {
		if !o.Freeform {
			out = append(out, OptionText(o.Label, o.Key))
		}
	}
	return out
}

// textChoice is the label of q's freeform option ("" for none).
func textChoice(q engine.Question) string {
	for _, o := range q.Options {
		if o.Freeform {
			return o.Label
		}
	}
	return ""
}

// AnswerCommand is the command that answers run's open question with
// answer: "/pipeline answer 3f9a1c A".
func AnswerCommand(runID, answer string) string {
	return "/pipeline answer " + runs.ShortID(runID) + " " + answer
}

// AnswerHint says how to answer q of run runID. typed: where people type
// (the console), a choice's key on its own answers when it is the only
// question waiting; otherwise (Slack) the prompt's buttons do.
func AnswerHint(runID string, q engine.Question, typed bool) string {
	var keys []string
	for _, o := range q.Options {
		if o.Freeform {
			continue
		}
		k := o.Key
		if k == "" || q.KeyShared(k) {
			k = engine.NormalizeLabelDisplay(o.Label)
		}
		keys = append(keys, k)
	}
	var ways []string
	switch {
	case len(keys) > 0 && typed:
		ways = append(ways, "type "+orList(keys), AnswerCommand(runID, keys[0]))
	case len(keys) > 0:
		ways = append(ways, "use the buttons in the run's thread", AnswerCommand(runID, keys[0]))
	}
	if q.AcceptsText() {
		label := textChoice(q)
		if label == "" {
			label = "it"
		}
		if !typed {
			ways = append(ways, "reply in the run's thread with your text")
		}
		ways = append(ways, AnswerCommand(runID, "<your text>")+" to answer "+label)
	}
	return "Answer: " + strings.Join(ways, ", or ")
}

// orList joins words as "A, B or C".
func orList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// Waiting is a run waiting at a gate, as WhichRun lists it: its gate and
// what the run is — its pipeline's name and its goal.
type Waiting struct {
	Gate     runs.Gate
	Pipeline string
	Goal     string
}

// WhichRun asks which run a typed answer is for when several that offer it
// wait: each run's short id, pipeline and goal, its question and choices,
// and the command that answers it with what was typed.
func WhichRun(typed string, waiting []Waiting) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d runs are waiting for an answer — which one is %q for?", len(waiting), typed)
	for _, w := range waiting {
		g := w.Gate
		q := g.Question()
		fmt.Fprintf(&b, "\n  %s  %s", runs.ShortID(g.RunID), cmp.Or(w.Pipeline, "pipeline"))
		if w.Goal != "" {
			b.WriteString(": " + w.Goal)
		}
		fmt.Fprintf(&b, "\n     ❓ %s", QuestionText(q))
		if cs := choices(q); len(cs) > 0 {
			b.WriteString(" — " + strings.Join(cs, "   "))
		}
		b.WriteString("\n     " + AnswerCommand(g.RunID, typed))
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

// ResolutionOf describes how g ended, showing its answerer as by; note is
// why it was withdrawn, when the usual words do not say it.
func ResolutionOf(g runs.Gate, by string, note runs.GateNote) Resolution {
	r := Resolution{Question: g.Question(), State: g.Status, By: by, At: g.AnsweredAt, Note: gateNote(note)}
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

// gateNote words why a posting was withdrawn ("" for the usual words).
func gateNote(n runs.GateNote) string {
	switch n {
	case runs.NoteSuperseded:
		return "Superseded by a newer prompt below."
	case runs.NoteCancelled:
		return "The run was cancelled before anyone answered."
	case runs.NoteHostStopped:
		return "The host stopped before anyone answered; the run asks again when it resumes."
	}
	return string(n)
}

// Text says how the gate ended: "✓ Ana chose Approve at 14:03 UTC".
func (r Resolution) Text() string {
	q := Asked(r.Question) + "\n"
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

// StartedWithWarnings tells whoever started a run that its pipeline has
// warnings (listed under it), as it starts.
func StartedWithWarnings(runID string) string {
	return "⚠ Run " + runs.ShortID(runID) + " started, but its pipeline has warnings — fix them, or a group with pipelines.strict refuses it:"
}

// StrictRefusal says a pipeline with warnings was not started.
func StrictRefusal() string {
	return Refused("Not started: this group runs only pipelines without warnings (pipelines.strict); fix the warnings above and run it again.")
}
