package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"nanohost/internal/pipeline"
)

// maxReasks is how often a human gate asks again after an answer that
// matches no option, before it gives up with a FAIL.
const maxReasks = 3

// Context keys a human gate sets.
const (
	KeyGateSelected = "human.gate.selected"
	KeyGateLabel    = "human.gate.label"
	KeyGateText     = "human.gate.text"
)

// humanHandler asks the Interviewer to choose among the node's outgoing
// edges (spec §4.6, §6).
type humanHandler struct{}

func (humanHandler) Execute(ctx context.Context, st *Stage) (Outcome, error) {
	opts := GateOptions(st.Graph, st.Node)
	if len(opts) == 0 {
		return Outcome{Status: StatusFail, FailureReason: fmt.Sprintf("human gate %s has no outgoing edges to offer as choices", st.Node.ID)}, nil
	}
	iv := st.w.r.cfg.Interviewer
	if iv == nil {
		return Outcome{}, errors.New("no interviewer configured for human gates")
	}
	q := st.question(opts)
	for ask := 0; ask <= maxReasks; ask++ {
		ans, err := st.ask(ctx, iv, q)
		if err != nil {
			return Outcome{}, err
		}
		switch ans.Kind {
		case AnswerTimeout:
			return timeoutOutcome(st, opts), nil
		case AnswerSkipped:
			return Outcome{Status: StatusFail, FailureReason: fmt.Sprintf("the human skipped the question at %s", st.Node.ID)}, nil
		}
		value := ans.Value
		if ans.Kind == AnswerText {
			value = ans.Text
		}
		if opt, ok := matchOption(opts, value); ok && ans.Kind != AnswerText {
			return chosen(opt, ""), nil
		}
		if ff, ok := freeformOption(opts); ok && strings.TrimSpace(value) != "" {
			return chosen(ff, value), nil
		}
		if opt, ok := matchOption(opts, value); ok {
			return chosen(opt, ""), nil
		}
		if ask < maxReasks {
			q = reask(st, q, value, ask+1)
		}
	}
	return Outcome{Status: StatusFail, FailureReason: fmt.Sprintf("no valid answer at %s after %d tries; the options are %s", st.Node.ID, maxReasks+1, optionList(opts))}, nil
}

// reask is q asked again (the n-th re-ask) after value matched none of its
// options: a new id, the prompt unchanged, the unmatched answer as data. A
// Warning carries the same as data (Question, Attempt n of MaxAttempt) for
// the run's log; runlog words both.
func reask(st *Stage, q Question, value string, n int) Question {
	q.ID = fmt.Sprintf("%s-%d.%d", st.Node.ID, st.Visit, n)
	q.Unmatched = value
	st.Emit(Event{Type: EventWarning, Label: st.Node.Label(), Question: &q, Attempt: n, MaxAttempt: maxReasks})
	return q
}

// GateOptions derives a human gate's choices from its outgoing edges: the
// label (or target id), its accelerator key, the target, and whether the
// edge takes free text (freeform=true).
func GateOptions(g *pipeline.Graph, n *pipeline.Node) []Option {
	var opts []Option
	for _, e := range g.Outgoing(n.ID) {
		label := strings.TrimSpace(e.Attrs["label"])
		if label == "" {
			label = e.To
		}
		opts = append(opts, Option{Key: AcceleratorKey(label), Label: label, To: e.To, Freeform: isTrue(e.Attrs["freeform"])})
	}
	return opts
}

func (st *Stage) question(opts []Option) Question {
	text := strings.TrimSpace(strings.ReplaceAll(st.Node.Attrs["prompt"], "$goal", st.Graph.Goal()))
	if text == "" {
		text = st.Node.Label()
	}
	if expanded, err := expandRefs(st, "question", text, nil); err == nil {
		text = expanded
	} else {
		st.Warn(err.Error() + "; the question is asked as written")
	}
	q := Question{
		ID: fmt.Sprintf("%s-%d", st.Node.ID, st.Visit), RunID: st.RunID, Stage: st.Node.ID,
		Text: text, Type: QuestionMultipleChoice, Options: opts, Approvers: st.Node.Attrs["approvers"],
	}
	allFree := true
	for _, o := range opts {
		allFree = allFree && o.Freeform
	}
	if allFree {
		q.Type = QuestionFreeform
	}
	if d, err := st.Node.Attrs.Duration("timeout", 0); err == nil {
		q.TimeoutSeconds = d.Seconds()
	} else {
		st.Warn(err.Error() + "; waiting without a timeout")
	}
	return q
}

// ask puts q to the interviewer with the interview events around it.
func (st *Stage) ask(ctx context.Context, iv Interviewer, q Question) (Answer, error) {
	now := st.w.r.cfg.Now
	st.Emit(Event{Type: EventInterviewStarted, Label: st.Node.Label(), Question: &q, Message: q.Text})
	began := now()
	ans, err := iv.Ask(ctx, q)
	dur := now().Sub(began)
	if err != nil {
		return Answer{}, fmt.Errorf("ask the human at %s: %w", st.Node.ID, err)
	}
	if ans.Kind == AnswerTimeout {
		st.Emit(Event{Type: EventInterviewTimeout, Label: st.Node.Label(), Question: &q, Duration: dur})
	} else {
		st.Emit(Event{Type: EventInterviewCompleted, Label: st.Node.Label(), Question: &q, Answer: &ans, Duration: dur})
	}
	return ans, nil
}

// timeoutOutcome uses human.default_choice, else asks for a retry.
func timeoutOutcome(st *Stage, opts []Option) Outcome {
	def := strings.TrimSpace(st.Node.Attrs["human.default_choice"])
	if def == "" {
		return Outcome{Status: StatusRetry, FailureReason: fmt.Sprintf("human gate %s timed out and has no human.default_choice", st.Node.ID)}
	}
	opt, ok := matchOption(opts, def)
	if !ok {
		return Outcome{Status: StatusFail, FailureReason: fmt.Sprintf("human gate %s timed out and its human.default_choice=%q is none of the options %s", st.Node.ID, def, optionList(opts))}
	}
	out := chosen(opt, "")
	out.Notes = "timed out; took human.default_choice " + strconv.Quote(def)
	return out
}

// matchOption finds the option an answer names (OptionIndex).
func matchOption(opts []Option, value string) (Option, bool) {
	if i, ok := OptionIndex(opts, value); ok {
		return opts[i], true
	}
	return Option{}, false
}

// chosen is the outcome of selecting opt (with free text, for a freeform edge).
func chosen(opt Option, text string) Outcome {
	out := Outcome{
		Status: StatusSuccess, PreferredLabel: opt.Label, SuggestedNextIDs: []string{opt.To},
		ContextUpdates: map[string]any{KeyGateSelected: opt.Key, KeyGateLabel: opt.Label},
		Notes:          "human selected " + opt.Label,
	}
	if opt.Freeform {
		out.ContextUpdates[KeyGateText] = text
		out.Notes = "human answered in free text"
	}
	return out
}

func optionList(opts []Option) string {
	parts := make([]string, len(opts))
	for i, o := range opts {
		parts[i] = fmt.Sprintf("[%s] %s", o.Key, NormalizeLabelDisplay(o.Label))
	}
	return strings.Join(parts, ", ")
}

// NormalizeLabelDisplay strips a label's accelerator prefix but keeps its case.
func NormalizeLabelDisplay(label string) string {
	s := strings.TrimSpace(label)
	for _, re := range acceleratorPatterns() {
		if loc := re.FindStringIndex(s); loc != nil {
			return strings.TrimSpace(s[loc[1]:])
		}
	}
	return s
}
