package runs

import (
	"fmt"
	"strings"
	"time"

	"nanohost/internal/pipeline/engine"
)

// Gate is one posting of a human gate (a wait.human question). (RunID,
// GateID) names the gate; Nonce names this posting, so a button of an
// earlier posting (before a host restart, say) cannot answer it. The store
// holds the one authoritative copy: an answer is a compare-and-set there.
type Gate struct {
	RunID  string `json:"run_id"`
	GateID string `json:"gate_id"` // engine Question.ID ("<node>-<visit>")
	NodeID string `json:"node_id"`

	// The question as the engine asked it (Question rebuilds it).
	Text           string              `json:"question"`
	Choices        []engine.Option     `json:"choices"`
	Type           engine.QuestionType `json:"type,omitempty"`
	Approvers      string              `json:"approvers,omitempty"`
	TimeoutSeconds float64             `json:"timeout_seconds,omitempty"`
	// Unmatched is, on a re-ask, the previous answer that matched no
	// option (engine Question.Unmatched), kept so a posting after a
	// restart says why it asks again.
	Unmatched string `json:"unmatched,omitempty"`

	Nonce     string    `json:"nonce"`
	MessageTS string    `json:"message_ts,omitempty"` // the chat message that asked
	AskedAt   time.Time `json:"asked_at"`

	Status GateState `json:"status"`
	// Option is the 1-based position of the chosen option (0: none).
	Option int `json:"option,omitempty"`
	// Answer is the chosen option's value (ChoiceValue), or the free text
	// of a text answer.
	Answer     string    `json:"answer,omitempty"`
	AnsweredBy string    `json:"answered_by,omitempty"`
	AnsweredAt time.Time `json:"answered_at,omitzero"`
}

// NewGate is a fresh open posting of q, asked now with nonce.
func NewGate(q engine.Question, nonce string, at time.Time) Gate {
	return Gate{
		RunID: q.RunID, GateID: q.ID, NodeID: q.Stage,
		Text: q.Text, Choices: q.Options, Type: q.Type, Approvers: q.Approvers, TimeoutSeconds: q.TimeoutSeconds,
		Unmatched: q.Unmatched, Nonce: nonce, AskedAt: at, Status: GateOpen,
	}
}

// Question is the engine's question this gate asks.
func (g Gate) Question() engine.Question {
	return engine.Question{
		ID: g.GateID, RunID: g.RunID, Stage: g.NodeID, Text: g.Text, Type: g.Type,
		Options: g.Choices, TimeoutSeconds: g.TimeoutSeconds, Approvers: g.Approvers, Unmatched: g.Unmatched,
	}
}

// TextAnswer reports whether the gate was answered with free text.
func (g Gate) TextAnswer() bool {
	if g.Status != GateAnswered {
		return false
	}
	if g.Option < 1 || g.Option > len(g.Choices) {
		return true
	}
	return g.Choices[g.Option-1].Freeform
}

// EngineAnswer is what the engine gets for a settled gate.
func (g Gate) EngineAnswer() engine.Answer {
	switch {
	case g.Status == GateTimedOut:
		return engine.Answer{Kind: engine.AnswerTimeout}
	case g.TextAnswer():
		return engine.Answer{Kind: engine.AnswerText, Text: g.Answer, By: g.AnsweredBy}
	}
	return engine.Answer{Kind: engine.AnswerValue, Value: g.Answer, By: g.AnsweredBy}
}

// ChosenLabel is what was chosen, for people: the option's label as the
// pipeline wrote it ("[A] Approve"), or the free text in quotes.
func (g Gate) ChosenLabel() string {
	if g.TextAnswer() {
		return fmt.Sprintf("%q", g.Answer)
	}
	if g.Option >= 1 && g.Option <= len(g.Choices) {
		return g.Choices[g.Option-1].Label
	}
	return g.Answer
}

// GateAnswer is an answer to a gate from a person: exactly one of Option (a
// button: the option's 1-based position, unambiguous whatever the labels),
// Choice (a typed key, label or target node) or Text (free text for a gate
// that takes it). Nonce ties it to one posting of the gate; "" means the
// current posting (the web, which lists the current one).
type GateAnswer struct {
	RunID  string
	GateID string
	Nonce  string
	Option int
	Choice string
	Text   string
}

// describe names the answer for logs and refusals.
func (a GateAnswer) describe() string {
	switch {
	case a.Option > 0:
		return fmt.Sprintf("choice #%d", a.Option)
	case a.Text != "":
		return "a text answer"
	}
	return fmt.Sprintf("%q", a.Choice)
}

// resolve checks a against q and returns the chosen option's 1-based
// position and the recorded answer (the option's value, or the free text).
// A refusal wraps ErrInvalidAnswer and says what would fit.
func (a GateAnswer) resolve(q engine.Question) (option int, answer string, err error) {
	given := 0
	for _, set := range []bool{a.Option != 0, strings.TrimSpace(a.Choice) != "", strings.TrimSpace(a.Text) != ""} {
		if set {
			given++
		}
	}
	if given != 1 {
		return 0, "", fmt.Errorf("%w: give exactly one of an option number, a choice and a text", ErrInvalidAnswer)
	}
	switch {
	case a.Text != "":
		if !q.AcceptsText() {
			return 0, "", fmt.Errorf("%w: this gate takes one of its choices, not free text: %s", ErrInvalidAnswer, choiceList(q))
		}
		for i, o := range q.Options {
			if o.Freeform {
				return i + 1, strings.TrimSpace(a.Text), nil
			}
		}
		return 0, strings.TrimSpace(a.Text), nil
	case a.Option != 0:
		if a.Option < 1 || a.Option > len(q.Options) {
			return 0, "", fmt.Errorf("%w: option %d is not one of this gate's %d choices (they are numbered from 1)", ErrInvalidAnswer, a.Option, len(q.Options))
		}
		return a.Option, q.ChoiceValue(a.Option - 1), nil
	}
	i, ok := engine.OptionIndex(q.Options, a.Choice)
	if !ok || q.Options[i].Freeform {
		return 0, "", fmt.Errorf("%w: %s is not one of this gate's choices (%s)", ErrInvalidAnswer, a.describe(), choiceList(q))
	}
	if strings.EqualFold(strings.TrimSpace(a.Choice), q.Options[i].Key) && q.KeyShared(q.Options[i].Key) {
		return 0, "", fmt.Errorf("%w: %q is the key of more than one choice (%s): answer with the choice's name",
			ErrInvalidAnswer, strings.TrimSpace(a.Choice), sharing(q, q.Options[i].Key))
	}
	return i + 1, q.ChoiceValue(i), nil
}

// choiceList lists q's choices as people see them: "[A] Approve, [R] Rework".
func choiceList(q engine.Question) string {
	var parts []string
	for _, o := range q.Options {
		if o.Freeform {
			continue
		}
		label := engine.NormalizeLabelDisplay(o.Label)
		if o.Key != "" {
			label = "[" + o.Key + "] " + label
		}
		parts = append(parts, label)
	}
	return strings.Join(parts, ", ")
}

// sharing lists the options with accelerator key key: "[A] Abort, [A] Approve".
func sharing(q engine.Question, key string) string {
	var labels []string
	for _, o := range q.Options {
		if strings.EqualFold(o.Key, key) {
			labels = append(labels, "["+o.Key+"] "+engine.NormalizeLabelDisplay(o.Label))
		}
	}
	return strings.Join(labels, ", ")
}
