// Package interview holds the built-in Interviewers of spec §6.4 — the
// frontends a human gate asks through when no chat channel does: AutoApprove
// for CI, Queue for tests and replays (fed from an A.json file), Console for
// a terminal, and Recording to keep an audit of what was asked and answered.
package interview

import (
	"context"

	"nanohost/internal/pipeline/engine"
)

// AutoApprove answers every question at once: yes to yes/no and
// confirmation questions, the first option of a multiple choice, and
// "auto-approved" as free text.
type AutoApprove struct{}

// Ask answers q without waiting.
func (AutoApprove) Ask(ctx context.Context, q engine.Question) (engine.Answer, error) {
	if err := ctx.Err(); err != nil {
		return engine.Answer{}, err
	}
	switch {
	case q.Type == engine.QuestionYesNo || q.Type == engine.QuestionConfirmation:
		return engine.Answer{Value: "yes", By: "auto"}, nil
	case q.Type != engine.QuestionFreeform && len(q.Options) > 0:
		return engine.Answer{Value: q.ChoiceValue(0), By: "auto"}, nil
	}
	return engine.Answer{Kind: engine.AnswerText, Value: "auto-approved", Text: "auto-approved", By: "auto"}, nil
}
