package interview

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/testkit"
)

type term struct {
	c   *Console
	in  *io.PipeWriter
	out *testkit.Buffer
}

func newTerm(t *testing.T) *term {
	pr, pw := io.Pipe()
	out := &testkit.Buffer{}
	t.Cleanup(func() { pw.Close() })
	return &term{c: NewConsole(pr, out), in: pw, out: out}
}

func (tm *term) typeLine(t *testing.T, s string) {
	t.Helper()
	if _, err := io.WriteString(tm.in, s+"\n"); err != nil {
		t.Fatal(err)
	}
}

type result struct {
	a   engine.Answer
	err error
}

func (tm *term) ask(ctx context.Context, q engine.Question) <-chan result {
	ch := make(chan result, 1)
	go func() {
		a, err := tm.c.Ask(ctx, q)
		ch <- result{a, err}
	}()
	return ch
}

func TestConsoleMultipleChoice(t *testing.T) {
	tm := newTerm(t)
	got := tm.ask(context.Background(), review)
	tm.out.WaitFor(t, "Select: ", 5*time.Second)
	tm.typeLine(t, "x")
	tm.out.WaitFor(t, "Please choose A, F", 5*time.Second)
	tm.typeLine(t, "f")
	r := <-got
	if r.err != nil || r.a != (engine.Answer{Value: "F", By: "console"}) {
		t.Fatalf("got %+v, %v", r.a, r.err)
	}
	out := tm.out.String()
	for _, want := range []string{"[?] Review the change\n", "  [A] Approve\n", "  [F] Fix\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestConsoleMatchesNumbersLabelsAndTargets(t *testing.T) {
	for typed, want := range map[string]string{"2": "F", "approve": "A", "[F] Fix": "F", "deploy": "A", " a ": "A"} {
		a, ok := interpret(review, typed)
		if !ok || a.Value != want {
			t.Errorf("typed %q: got %+v, %v; want %s", typed, a, ok, want)
		}
	}
}

func TestConsoleSharesTheReaderAcrossQuestions(t *testing.T) {
	// Both answers arrive in one write: the second must not be lost in a
	// buffer that belonged to the first question.
	pr, pw := io.Pipe()
	c := NewConsole(pr, io.Discard)
	go func() { io.WriteString(pw, "A\nF\n"); pw.Close() }()
	var got []string
	for range 2 {
		a, err := c.Ask(context.Background(), review)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, a.Value)
	}
	if strings.Join(got, ",") != "A,F" {
		t.Fatalf("got %v", got)
	}
}

func TestConsoleYesNoAndFreeform(t *testing.T) {
	tm := newTerm(t)
	got := tm.ask(context.Background(), engine.Question{Text: "Deploy?", Type: engine.QuestionYesNo})
	tm.out.WaitFor(t, "[Y/N]: ", 5*time.Second)
	tm.typeLine(t, "maybe")
	tm.out.WaitFor(t, "Please answer y or n.", 5*time.Second)
	tm.typeLine(t, "Y")
	if r := <-got; r.err != nil || r.a.Value != "yes" {
		t.Fatalf("yes/no: %+v, %v", r.a, r.err)
	}

	got = tm.ask(context.Background(), engine.Question{Text: "Why?", Type: engine.QuestionFreeform})
	tm.out.WaitFor(t, "> ", 5*time.Second)
	tm.typeLine(t, "  because the tests pass\r")
	if r := <-got; r.err != nil || r.a != (engine.Answer{Kind: engine.AnswerText, Text: "because the tests pass", By: "console"}) {
		t.Fatalf("freeform: %+v, %v", r.a, r.err)
	}
}

func TestConsoleFreeformOption(t *testing.T) {
	q := review
	q.Options = append(append([]engine.Option(nil), review.Options...), engine.Option{Key: "O", Label: "Other", To: "custom", Freeform: true})
	a, ok := interpret(q, "rename the flag first")
	if !ok || a.Kind != engine.AnswerText || a.Text != "rename the flag first" {
		t.Fatalf("got %+v, %v", a, ok)
	}
	if a, _ := interpret(q, "A"); a.Value != "A" {
		t.Fatalf("a key still selects its option: %+v", a)
	}
}

func TestConsoleTimeoutKeepsLateLineForNextQuestion(t *testing.T) {
	tm := newTerm(t)
	q := review
	q.TimeoutSeconds = 0.05
	r := <-tm.ask(context.Background(), q)
	if r.err != nil || r.a.Kind != engine.AnswerTimeout {
		t.Fatalf("got %+v, %v; want a timeout", r.a, r.err)
	}
	tm.out.WaitFor(t, "(no answer in time)", 5*time.Second)
	if !strings.Contains(tm.out.String(), "(answer within 50ms)") {
		t.Errorf("the deadline should be shown:\n%s", tm.out.String())
	}
	// The line typed late answers the next question.
	late := make(chan struct{})
	go func() { tm.typeLine(t, "A"); close(late) }()
	<-late
	r = <-tm.ask(context.Background(), review)
	if r.err != nil || r.a.Value != "A" {
		t.Fatalf("next question: %+v, %v", r.a, r.err)
	}
}

func TestConsoleCancel(t *testing.T) {
	tm := newTerm(t)
	ctx, cancel := context.WithCancel(context.Background())
	got := tm.ask(ctx, review)
	tm.out.WaitFor(t, "Select: ", 5*time.Second)
	cancel()
	if r := <-got; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("got %+v, %v; want context.Canceled", r.a, r.err)
	}
}

func TestConsoleEOFSkips(t *testing.T) {
	tm := newTerm(t)
	got := tm.ask(context.Background(), review)
	tm.out.WaitFor(t, "Select: ", 5*time.Second)
	tm.in.Close()
	if r := <-got; r.err != nil || r.a.Kind != engine.AnswerSkipped {
		t.Fatalf("got %+v, %v; want skipped", r.a, r.err)
	}
	// Later questions are skipped at once.
	if r := <-tm.ask(context.Background(), review); r.err != nil || r.a.Kind != engine.AnswerSkipped {
		t.Fatalf("after EOF: %+v, %v", r.a, r.err)
	}
}

func TestConsoleReadErrorIsReported(t *testing.T) {
	pr, pw := io.Pipe()
	pw.CloseWithError(errors.New("tty gone"))
	_, err := NewConsole(pr, io.Discard).Ask(context.Background(), review)
	if err == nil || !strings.Contains(err.Error(), "tty gone") {
		t.Fatalf("err = %v", err)
	}
}

func TestConsoleAsksOneQuestionAtATime(t *testing.T) {
	tm := newTerm(t)
	q1, q2 := review, review
	q1.Text, q2.Text = "First gate", "Second gate"
	r1 := tm.ask(context.Background(), q1)
	tm.out.WaitFor(t, "[?] First gate", 5*time.Second)
	r2 := tm.ask(context.Background(), q2)
	testkit.WaitUntil(t, 10*time.Second, "the second question waits for its turn", func() bool { return tm.c.queued.Load() == 1 })
	if strings.Contains(tm.out.String(), "Second gate") {
		t.Fatal("second question printed while the first is waiting")
	}
	tm.typeLine(t, "A")
	tm.out.WaitFor(t, "[?] Second gate", 5*time.Second)
	tm.typeLine(t, "F")
	if a, b := <-r1, <-r2; a.a.Value != "A" || b.a.Value != "F" {
		t.Fatalf("got %+v and %+v", a, b)
	}
}

func TestConsoleWaitingForTurnHonoursCancel(t *testing.T) {
	tm := newTerm(t)
	_ = tm.ask(context.Background(), review) // holds the console
	tm.out.WaitFor(t, "Select: ", 5*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if r := <-tm.ask(ctx, review); !errors.Is(r.err, context.DeadlineExceeded) {
		t.Fatalf("got %+v, %v", r.a, r.err)
	}
}

func TestStripAccelerator(t *testing.T) {
	for label, want := range map[string]string{"[Y] Yes, deploy": "Yes, deploy", "Y) Yes": "Yes", "Y - Yes": "Yes", "Yes": "Yes", "[Y]": "[Y]"} {
		if got := stripAccelerator(label, "Y"); got != want {
			t.Errorf("stripAccelerator(%q) = %q, want %q", label, got, want)
		}
	}
}

// The console prints a question in the words it is given (the host gives
// runlog's, which say why a gate asks again); without them, the prompt.
func TestConsolePrintsTheQuestionInTheWordsItIsGiven(t *testing.T) {
	q := review
	q.Unmatched = "maybe"
	for _, tc := range []struct {
		words func(engine.Question) string
		want  string
	}{
		{func(q engine.Question) string { return q.Unmatched + " named nothing: " + q.Text }, "[?] maybe named nothing: Review the change\n"},
		{nil, "[?] Review the change\n"},
	} {
		out := &testkit.Buffer{}
		c := &Console{In: strings.NewReader("A\n"), Out: out, Words: tc.words}
		if a, err := c.Ask(context.Background(), q); err != nil || a.Value != "A" {
			t.Fatalf("answer %+v, %v", a, err)
		}
		if !strings.Contains(out.String(), tc.want) {
			t.Errorf("output lacks %q:\n%s", tc.want, out.String())
		}
	}
}
