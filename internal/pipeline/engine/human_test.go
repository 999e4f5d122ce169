package engine_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/interview"
)

// The spec's "Human gate" example (§2.13) with a timeout and a freeform edge.
const reviewDOT = `digraph Review {
	start [shape=Mdiamond, label="Start"]
	exit  [shape=Msquare, label="Exit"]
	review_gate [shape=hexagon, label="Review Changes", timeout="30s", approvers="U123"]
	ship_it [prompt="ship"]
	fixes [prompt="fix"]
	start -> review_gate
	review_gate -> ship_it [label="[A] Approve"]
	review_gate -> fixes   [label="[F] Fix"]
	ship_it -> exit
	fixes -> review_gate
}`

// askLog is an interviewer answering from a list and keeping the questions.
type askLog struct {
	mu        sync.Mutex
	answers   []engine.Answer
	questions []engine.Question
}

func (a *askLog) Ask(_ context.Context, q engine.Question) (engine.Answer, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.questions = append(a.questions, q)
	if len(a.answers) == 0 {
		return engine.Answer{Kind: engine.AnswerSkipped}, nil
	}
	ans := a.answers[0]
	a.answers = a.answers[1:]
	return ans, nil
}

func values(vs ...string) []engine.Answer {
	var out []engine.Answer
	for _, v := range vs {
		out = append(out, engine.Answer{Value: v})
	}
	return out
}

// §11.12: wait.human presents choices and routes on the selection.
func TestHumanGatePresentsEdgeChoicesAndRoutesOnSelection(t *testing.T) {
	iv := &askLog{answers: values("F", "approve")}
	out := runGraph(t, reviewDOT, runOpts{interviewer: iv})
	wantStatus(t, out.res, "success")
	wantPath(t, out.res, "start", "review_gate", "fixes", "review_gate", "ship_it", "exit")
	q := iv.questions[0]
	want := []engine.Option{{Key: "A", Label: "[A] Approve", To: "ship_it"}, {Key: "F", Label: "[F] Fix", To: "fixes"}}
	if !slices.Equal(q.Options, want) {
		t.Errorf("options = %+v", q.Options)
	}
	if q.Text != "Review Changes" || q.Type != engine.QuestionMultipleChoice || q.TimeoutSeconds != 30 ||
		q.Stage != "review_gate" || q.ID != "review_gate-1" || q.Approvers != "U123" || q.RunID != "run-test" {
		t.Errorf("question = %+v", q)
	}
	if iv.questions[1].ID != "review_gate-2" {
		t.Errorf("second visit's question id = %q", iv.questions[1].ID)
	}
	if out.res.Context["human.gate.selected"] != "A" || out.res.Context["human.gate.label"] != "[A] Approve" {
		t.Errorf("context = %v / %v", out.res.Context["human.gate.selected"], out.res.Context["human.gate.label"])
	}
	if n := len(out.rec.ofType(engine.EventInterviewStarted)); n != 2 {
		t.Errorf("%d InterviewStarted events", n)
	}
	done := out.rec.ofType(engine.EventInterviewCompleted)
	if len(done) != 2 || done[0].Answer.Value != "F" || done[0].Question == nil {
		t.Errorf("InterviewCompleted = %+v", done)
	}
}

func TestHumanAnswerMatchesKeyLabelOrTarget(t *testing.T) {
	for _, answer := range []string{"a", "A", "Approve", "[A] Approve", "  approve ", "ship_it"} {
		out := runGraph(t, reviewDOT, runOpts{interviewer: &askLog{answers: values(answer)}})
		wantPath(t, out.res, "start", "review_gate", "ship_it", "exit")
	}
}

func TestHumanAnswerMatchingNothingIsAskedAgainThenFails(t *testing.T) {
	iv := &askLog{answers: values("maybe", "A")}
	out := runGraph(t, reviewDOT, runOpts{interviewer: iv})
	wantPath(t, out.res, "start", "review_gate", "ship_it", "exit")
	// The re-ask carries the unmatched answer as data; its prompt is the
	// node's own (runlog words the two together).
	if len(iv.questions) != 2 || iv.questions[1].Unmatched != "maybe" || iv.questions[1].Text != "Review Changes" ||
		iv.questions[1].ID != "review_gate-1.1" || iv.questions[0].Unmatched != "" {
		t.Errorf("asked %+v", iv.questions)
	}
	warned := out.rec.ofType(engine.EventWarning)
	if len(warned) != 1 || warned[0].Question == nil || warned[0].Question.Unmatched != "maybe" ||
		warned[0].Attempt != 1 || warned[0].MaxAttempt != 3 || warned[0].Message != "" {
		t.Errorf("warnings = %+v, want one carrying the unmatched answer and the ask (1 of 3) as data", warned)
	}

	iv = &askLog{answers: values("x", "y", "z", "w", "A")}
	out = runGraph(t, reviewDOT, runOpts{interviewer: iv})
	wantStatus(t, out.res, "fail")
	wantReasonContains(t, out.res, "no valid answer at review_gate after 4 tries", "[A] Approve, [F] Fix")
	if len(iv.questions) != 4 || iv.questions[3].Unmatched != "z" || iv.questions[3].ID != "review_gate-1.3" {
		t.Errorf("asked %d times (last %+v), want 4, the last after \"z\"", len(iv.questions), iv.questions[len(iv.questions)-1])
	}
	if n := len(out.rec.ofType(engine.EventWarning)); n != 3 {
		t.Errorf("%d warnings, want one per re-ask (3): none after the last answer, which asks nothing again", n)
	}
}

func TestHumanTimeoutTakesDefaultChoiceElseRetries(t *testing.T) {
	withDefault := strings.Replace(reviewDOT, `timeout="30s"`, `timeout="30s", human.default_choice="fixes"`, 1)
	iv := &askLog{answers: []engine.Answer{{Kind: engine.AnswerTimeout}, {Value: "A"}}}
	out := runGraph(t, withDefault, runOpts{interviewer: iv})
	wantPath(t, out.res, "start", "review_gate", "fixes", "review_gate", "ship_it", "exit")
	if len(out.rec.ofType(engine.EventInterviewTimeout)) != 1 {
		t.Error("no InterviewTimeout event")
	}

	// No default: RETRY, so the gate asks again within its retry budget.
	noDefault := strings.Replace(reviewDOT, `timeout="30s"`, `timeout="30s", max_retries=1`, 1)
	iv = &askLog{answers: []engine.Answer{{Kind: engine.AnswerTimeout}, {Value: "A"}}}
	out = runGraph(t, noDefault, runOpts{interviewer: iv})
	wantPath(t, out.res, "start", "review_gate", "ship_it", "exit")
	if out.res.Attempts["review_gate"] != 2 {
		t.Errorf("attempts = %v", out.res.Attempts)
	}

	iv = &askLog{answers: []engine.Answer{{Kind: engine.AnswerTimeout}}}
	out = runGraph(t, strings.Replace(reviewDOT, `timeout="30s"`, `timeout="30s", max_retries=0`, 1), runOpts{interviewer: iv})
	wantStatus(t, out.res, "fail")
	wantReasonContains(t, out.res, "timed out and has no human.default_choice")
}

func TestHumanSkipFails(t *testing.T) {
	out := runGraph(t, reviewDOT, runOpts{interviewer: interview.NewQueue(nil)})
	wantStatus(t, out.res, "fail")
	wantReasonContains(t, out.res, "skipped")
}

func TestFreeformEdgeTakesText(t *testing.T) {
	src := `digraph F {
		start [shape=Mdiamond]
		exit [shape=Msquare]
		ask [shape=hexagon, label="What next?"]
		approve [prompt="a"]
		custom [prompt="Do what the human said: $goal"]
		start -> ask
		ask -> approve [label="[A] Approve"]
		ask -> custom [label="Something else", freeform=true]
		approve -> exit
		custom -> exit
	}`
	for _, ans := range []engine.Answer{{Kind: engine.AnswerText, Text: "rename the flag"}, {Value: "rename the flag"}} {
		out := runGraph(t, src, runOpts{interviewer: &askLog{answers: []engine.Answer{ans}}})
		wantPath(t, out.res, "start", "ask", "custom", "exit")
		if out.res.Context["human.gate.text"] != "rename the flag" || out.res.Context["human.gate.label"] != "Something else" {
			t.Errorf("context = %v", out.res.Context)
		}
	}
	// A text answer naming a fixed option still picks it when it matches.
	out := runGraph(t, src, runOpts{interviewer: &askLog{answers: values("A")}})
	wantPath(t, out.res, "start", "ask", "approve", "exit")
}

func TestAutoApproveTakesTheFirstOption(t *testing.T) {
	out := runGraph(t, reviewDOT, runOpts{interviewer: interview.AutoApprove{}})
	wantPath(t, out.res, "start", "review_gate", "ship_it", "exit")
}
