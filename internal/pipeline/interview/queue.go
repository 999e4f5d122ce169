package interview

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"nanohost/internal/pipeline/engine"
)

// Queue answers questions from a fixed list, in order; once the list is
// used up every answer is "skipped" (spec §6.4 QueueInterviewer). It is safe
// for concurrent use.
type Queue struct {
	mu      sync.Mutex
	answers []engine.Answer
}

// NewQueue returns a queue that gives the answers in order.
func NewQueue(answers []engine.Answer) *Queue {
	return &Queue{answers: append([]engine.Answer(nil), answers...)}
}

// Ask returns the next answer.
func (q *Queue) Ask(ctx context.Context, _ engine.Question) (engine.Answer, error) {
	if err := ctx.Err(); err != nil {
		return engine.Answer{}, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.answers) == 0 {
		return engine.Answer{Kind: engine.AnswerSkipped, By: "queue"}, nil
	}
	a := q.answers[0]
	q.answers = q.answers[1:]
	return a, nil
}

// Remaining reports how many answers have not been given yet.
func (q *Queue) Remaining() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.answers)
}

// maxAnswersFile caps A.json, a hand-written list of answers.
const maxAnswersFile = 1 << 20

// LoadAnswers reads an answers file (A.json).
func LoadAnswers(path string) ([]engine.Answer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read answers: %w", err)
	}
	answers, err := ParseAnswers(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return answers, nil
}

// ParseAnswers reads a JSON list of answers, one per question asked, in
// order. Each item is a string — an option key, label or target node id —
// or one of {"timeout": true}, {"skip": true}, {"text": "free text"} and
// {"value": "key"}; an object may add "by" to name who answered.
func ParseAnswers(data []byte) ([]engine.Answer, error) {
	if len(data) > maxAnswersFile {
		return nil, fmt.Errorf("answers file is %d bytes; the limit is 1 MiB", len(data))
	}
	var items []json.RawMessage
	if err := json.Unmarshal(data, &items); err != nil {
		return nil, fmt.Errorf(`answers must be a JSON list such as ["A", {"text": "looks good"}, {"timeout": true}]: %w`, describeJSONError(data, err))
	}
	answers := make([]engine.Answer, 0, len(items))
	for i, raw := range items {
		a, err := parseAnswer(raw)
		if err != nil {
			return nil, fmt.Errorf("answer %d: %w", i+1, err)
		}
		answers = append(answers, a)
	}
	return answers, nil
}

type answerItem struct {
	Timeout bool    `json:"timeout"`
	Skip    bool    `json:"skip"`
	Text    *string `json:"text"`
	Value   *string `json:"value"`
	By      string  `json:"by"`
}

func parseAnswer(raw json.RawMessage) (engine.Answer, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if strings.TrimSpace(s) == "" {
			return engine.Answer{}, errors.New(`empty answer: give an option key, label or node id, or {"skip": true}`)
		}
		return engine.Answer{Value: s, By: "answers-file"}, nil
	}
	var item answerItem
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&item); err != nil {
		return engine.Answer{}, fmt.Errorf(`want a string or an object with one of "timeout", "skip", "text", "value": %v`, err)
	}
	by := item.By
	if by == "" {
		by = "answers-file"
	}
	var kinds []string
	a := engine.Answer{By: by}
	if item.Timeout {
		kinds, a.Kind = append(kinds, "timeout"), engine.AnswerTimeout
	}
	if item.Skip {
		kinds, a.Kind = append(kinds, "skip"), engine.AnswerSkipped
	}
	if item.Text != nil {
		kinds, a.Kind, a.Text = append(kinds, "text"), engine.AnswerText, *item.Text
	}
	if item.Value != nil {
		kinds, a.Kind, a.Value = append(kinds, "value"), engine.AnswerValue, *item.Value
	}
	switch len(kinds) {
	case 0:
		return engine.Answer{}, errors.New(`empty object: use {"timeout": true}, {"skip": true}, {"text": "…"} or {"value": "…"}`)
	case 1:
		return a, nil
	}
	return engine.Answer{}, fmt.Errorf("an answer is one thing; this one has %s", strings.Join(kinds, " and "))
}

func describeJSONError(data []byte, err error) error {
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		before := data[:min(max(syn.Offset-1, 0), int64(len(data)))]
		line := bytes.Count(before, []byte("\n")) + 1
		col := len(before) - bytes.LastIndexByte(before, '\n')
		return fmt.Errorf("invalid JSON at line %d, column %d: %v", line, col, syn)
	}
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		return fmt.Errorf("got %s", typ.Value)
	}
	return err
}
