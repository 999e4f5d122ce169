package engine

import "context"

// QuestionType is the kind of answer a question wants (spec §6.2).
type QuestionType string

const (
	QuestionMultipleChoice QuestionType = "multiple_choice"
	QuestionYesNo          QuestionType = "yes_no"
	QuestionFreeform       QuestionType = "freeform"
	QuestionConfirmation   QuestionType = "confirmation"
)

// Option is one choice of a human gate.
type Option struct {
	Key   string `json:"key"`   // accelerator key, e.g. "A"
	Label string `json:"label"` // edge label, e.g. "[A] Approve"
	To    string `json:"to"`    // target node id
	// Freeform marks an edge that accepts free text (freeform=true).
	Freeform bool `json:"freeform,omitempty"`
}

// Question is what a human gate asks.
type Question struct {
	ID      string       `json:"id"` // unique within the run: "<node>-<visit>"
	RunID   string       `json:"run_id"`
	Stage   string       `json:"stage"` // node id
	Text    string       `json:"text"`
	Type    QuestionType `json:"type"`
	Options []Option     `json:"options"`
	// Timeout is the node's timeout (0 = wait forever).
	TimeoutSeconds float64 `json:"timeout_seconds,omitempty"`
	// Approvers is the node's `approvers` attribute, for channels that enforce it.
	Approvers string `json:"approvers,omitempty"`
	// Unmatched is, on a re-ask, the answer to the gate's previous ask
	// that matched none of the options ("" on the first ask). Text stays
	// the node's own prompt; the words around both are the channel's
	// (runlog.QuestionText).
	Unmatched string `json:"unmatched,omitempty"`
}

// AnswerKind distinguishes a real answer from a timeout or a skip.
type AnswerKind string

const (
	AnswerValue   AnswerKind = ""        // Value holds a key, label or target id
	AnswerText    AnswerKind = "text"    // Text holds free text
	AnswerTimeout AnswerKind = "timeout" // nobody answered in time
	AnswerSkipped AnswerKind = "skipped" // the human declined
)

// Answer is a human's reply.
type Answer struct {
	Kind  AnswerKind `json:"kind,omitempty"`
	Value string     `json:"value,omitempty"`
	Text  string     `json:"text,omitempty"`
	// By names who answered (a Slack user id, "console", "auto").
	By string `json:"by,omitempty"`
}

// Interviewer is the human-in-the-loop frontend (spec §6.1): a terminal, a
// Slack thread, a web page, or a queue in tests. Ask blocks until an answer,
// a timeout, or ctx is done (then it returns ctx.Err()).
type Interviewer interface {
	Ask(ctx context.Context, q Question) (Answer, error)
}

// InterviewerFunc adapts a function to Interviewer (the spec's CallbackInterviewer).
type InterviewerFunc func(ctx context.Context, q Question) (Answer, error)

// Ask calls f.
func (f InterviewerFunc) Ask(ctx context.Context, q Question) (Answer, error) { return f(ctx, q) }
