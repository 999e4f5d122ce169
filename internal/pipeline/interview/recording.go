package interview

import (
	"context"
	"sync"

	"nanohost/internal/pipeline/engine"
)

// Record is one question and the answer it got.
type Record struct {
	Question engine.Question `json:"question"`
	Answer   engine.Answer   `json:"answer"`
}

// Recording wraps another interviewer and keeps every question it answered
// (timeouts and skips included; a cancelled question got no answer and is
// not kept), for audit trails and replay. It is safe for concurrent use.
type Recording struct {
	Inner engine.Interviewer

	mu      sync.Mutex
	records []Record
}

// Ask asks Inner and records the exchange.
func (r *Recording) Ask(ctx context.Context, q engine.Question) (engine.Answer, error) {
	a, err := r.Inner.Ask(ctx, q)
	if err != nil {
		return a, err
	}
	r.mu.Lock()
	r.records = append(r.records, Record{Question: q, Answer: a})
	r.mu.Unlock()
	return a, nil
}

// Records returns a copy of the exchanges so far, in the order they were answered.
func (r *Recording) Records() []Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Record(nil), r.records...)
}

// Answers returns just the answers, in order: a Queue of them replays the run.
func (r *Recording) Answers() []engine.Answer {
	recs := r.Records()
	out := make([]engine.Answer, len(recs))
	for i, rec := range recs {
		out[i] = rec.Answer
	}
	return out
}
