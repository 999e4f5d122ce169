package interview

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"nanohost/internal/pipeline/engine"
)

var review = engine.Question{
	ID: "review-1", Stage: "review", Text: "Review the change", Type: engine.QuestionMultipleChoice,
	Options: []engine.Option{
		{Key: "A", Label: "[A] Approve", To: "deploy"},
		{Key: "F", Label: "[F] Fix", To: "fix"},
	},
}

func TestAutoApprove(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		q    engine.Question
		want engine.Answer
	}{
		{"multiple choice takes the first option", review, engine.Answer{Value: "A", By: "auto"}},
		{"yes/no", engine.Question{Type: engine.QuestionYesNo}, engine.Answer{Value: "yes", By: "auto"}},
		{"confirmation", engine.Question{Type: engine.QuestionConfirmation}, engine.Answer{Value: "yes", By: "auto"}},
		{"freeform", engine.Question{Type: engine.QuestionFreeform}, engine.Answer{Kind: engine.AnswerText, Value: "auto-approved", Text: "auto-approved", By: "auto"}},
		{"choice without options", engine.Question{Type: engine.QuestionMultipleChoice}, engine.Answer{Kind: engine.AnswerText, Value: "auto-approved", Text: "auto-approved", By: "auto"}},
		{"shared key: the value names the first option", engine.Question{Type: engine.QuestionMultipleChoice, Options: []engine.Option{
			{Key: "A", Label: "Approve", To: "deploy"}, {Key: "A", Label: "Abort", To: "exit"}}}, engine.Answer{Value: "A", By: "auto"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := AutoApprove{}.Ask(ctx, tt.q)
			if err != nil || got != tt.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestQueue(t *testing.T) {
	q := NewQueue([]engine.Answer{{Value: "A"}, {Kind: engine.AnswerTimeout}})
	ctx := context.Background()
	var got []engine.Answer
	for range 3 {
		a, err := q.Ask(ctx, review)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, a)
	}
	want := []engine.Answer{{Value: "A"}, {Kind: engine.AnswerTimeout}, {Kind: engine.AnswerSkipped, By: "queue"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	if q.Remaining() != 0 {
		t.Error("queue should be empty")
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := q.Ask(cancelled, review); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled ask: %v", err)
	}
}

func TestParseAnswers(t *testing.T) {
	got, err := ParseAnswers([]byte(`["A", "fix", {"timeout": true}, {"skip": true}, {"text": "ship it"}, {"value": "F", "by": "U123"}]`))
	if err != nil {
		t.Fatal(err)
	}
	want := []engine.Answer{
		{Value: "A", By: "answers-file"}, {Value: "fix", By: "answers-file"},
		{Kind: engine.AnswerTimeout, By: "answers-file"}, {Kind: engine.AnswerSkipped, By: "answers-file"},
		{Kind: engine.AnswerText, Text: "ship it", By: "answers-file"}, {Value: "F", By: "U123"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}

	for src, wantErr := range map[string]string{
		`{"answers": []}`:                  "must be a JSON list",
		"[\n \"A\",\n]":                    "line 3, column 1",
		`["A", 3]`:                         "answer 2: want a string or an object",
		`[{"timout": true}]`:               `answer 1: want a string or an object with one of "timeout", "skip", "text", "value": json: unknown field "timout"`,
		`[{}]`:                             "answer 1: empty object",
		`[{"timeout": true, "text": "x"}]`: "answer 1: an answer is one thing; this one has timeout and text",
		`["  "]`:                           "answer 1: empty answer",
	} {
		if _, err := ParseAnswers([]byte(src)); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("ParseAnswers(%s) err = %v, want %q", src, err, wantErr)
		}
	}
}

func TestLoadAnswers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "A.json")
	if err := os.WriteFile(path, []byte(`["A", {"skip": true}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := LoadAnswers(path)
	if err != nil || len(got) != 2 {
		t.Fatalf("%+v, %v", got, err)
	}
	if err := os.WriteFile(path, []byte(`[1]`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadAnswers(path); err == nil || !strings.HasPrefix(err.Error(), path+": answer 1") {
		t.Fatalf("err = %v", err)
	}
}

func TestRecordingIsConcurrencySafe(t *testing.T) {
	rec := &Recording{Inner: AutoApprove{}}
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			q := review
			q.ID = fmt.Sprintf("review-%d", i)
			if _, err := rec.Ask(context.Background(), q); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	recs := rec.Records()
	if len(recs) != 20 {
		t.Fatalf("%d records, want 20", len(recs))
	}
	for _, r := range recs {
		if r.Answer.Value != "A" || !strings.HasPrefix(r.Question.ID, "review-") {
			t.Errorf("record %+v", r)
		}
	}
	// Replaying the recorded answers gives the same answers.
	replay := NewQueue(rec.Answers())
	a, _ := replay.Ask(context.Background(), review)
	if a != recs[0].Answer {
		t.Errorf("replay = %+v", a)
	}
}

func TestRecordingSkipsCancelledQuestions(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rec := &Recording{Inner: AutoApprove{}}
	if _, err := rec.Ask(ctx, review); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	if len(rec.Records()) != 0 {
		t.Error("a cancelled question got no answer and should not be recorded")
	}
}
