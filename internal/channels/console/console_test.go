package console_test

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"nanohost/internal/channels"
	"nanohost/internal/channels/console"
	"nanohost/internal/channels/gate"
	"nanohost/internal/channels/report"
	"nanohost/internal/pipeline/engine"
)

// terminal is a console wired to pipes, the way a person would use it.
type terminal struct {
	t       *testing.T
	typing  *io.PipeWriter
	screen  chan string
	inbound chan channels.Inbound
	con     *console.Console
	desk    *gate.Desk
}

func newTerminal(t *testing.T, ctx context.Context) *terminal {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	term := &terminal{t: t, typing: inW, screen: make(chan string, 1000), inbound: make(chan channels.Inbound, 10)}
	term.con = console.New(inR, outW)
	term.desk = gate.NewDesk(gate.NewMemBook(), slog.New(slog.DiscardHandler))
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			term.screen <- sc.Text()
		}
	}()
	go func() {
		_ = term.con.Run(ctx, func(in channels.Inbound) {
			if in.Kind == channels.KindGateAnswer {
				term.desk.HandleAnswer(ctx, term.con, in)
				return
			}
			term.inbound <- in
		})
	}()
	t.Cleanup(func() { inW.Close(); outW.Close(); term.desk.Wait() })
	return term
}

func (term *terminal) typeLine(s string) {
	term.t.Helper()
	if _, err := io.WriteString(term.typing, s+"\n"); err != nil {
		term.t.Fatalf("type %q: %v", s, err)
	}
}

// waitFor reads the screen until a line contains want, returning the lines read.
func (term *terminal) waitFor(want string) []string {
	term.t.Helper()
	var seen []string
	deadline := time.After(5 * time.Second)
	for {
		select {
		case line := <-term.screen:
			seen = append(seen, line)
			if strings.Contains(line, want) {
				return seen
			}
		case <-deadline:
			term.t.Fatalf("screen never showed %q; saw:\n%s", want, strings.Join(seen, "\n"))
		}
	}
}

// ask asks q at the console in the background; the answer arrives on the
// returned channel.
func (term *terminal) ask(ctx context.Context, q engine.Question) <-chan engine.Answer {
	answers := make(chan engine.Answer, 1)
	go func() {
		a, _ := term.desk.Interviewer(gate.Target{Channel: term.con, Chat: console.Chat}).Ask(ctx, q)
		answers <- a
	}()
	return answers
}

func approvalQuestion(id string, freeform bool) engine.Question {
	q := engine.Question{
		ID: id, RunID: "run-1", Stage: "review", Text: "Ship the RSI change?", Type: engine.QuestionMultipleChoice,
		Options: []engine.Option{{Key: "A", Label: "[A] Approve", To: "ship"}, {Key: "R", Label: "[R] Reject", To: "fix"}},
	}
	if freeform {
		q.Options = append(q.Options, engine.Option{Label: "Other", To: "replan", Freeform: true})
	}
	return q
}

func TestConsoleGateEndToEnd(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	term := newTerminal(t, ctx)
	rep := report.Start(ctx, report.Config{Channel: term.con, Chat: console.Chat, RunID: "run-1", Pipeline: "Feature"})
	ask := term.desk.Interviewer(gate.Target{Channel: term.con, Chat: console.Chat, Thread: rep, StartedBy: console.User})

	answers := make(chan engine.Answer, 1)
	go func() {
		a, err := ask.Ask(ctx, approvalQuestion("review-1", false))
		if err != nil {
			t.Errorf("Ask: %v", err)
		}
		answers <- a
	}()
	term.waitFor("[Pipeline] Feature")
	term.waitFor("❓ Ship the RSI change?")
	term.waitFor("[A] Approve   [R] Reject")

	term.typeLine("maybe") // not a key: the console says what it wants
	term.waitFor("(type one of the keys above)")
	term.typeLine("r")

	select {
	case a := <-answers:
		if a.Kind != engine.AnswerValue || a.Value != "R" || a.By != console.User {
			t.Errorf("answer = %+v, want value R by %s", a, console.User)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the gate was never answered")
	}
	term.waitFor("✓ you chose [R] Reject")

	// After the gate, a typed line is a plain message again.
	term.typeLine("thanks")
	if in := <-term.inbound; in.Kind != channels.KindMessage || in.Text != "thanks" {
		t.Errorf("after the gate, got %+v, want a plain message", in)
	}
}

func TestConsoleFreeformGateTakesText(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	term := newTerminal(t, ctx)
	answers := term.ask(ctx, approvalQuestion("review-2", true))
	term.waitFor("Reply with text to answer Other")
	term.typeLine("split it into two PRs")
	a := <-answers
	if a.Kind != engine.AnswerText || a.Text != "split it into two PRs" {
		t.Errorf("answer = %+v, want the typed text", a)
	}
}

func TestConsoleGateTimesOut(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	term := newTerminal(t, ctx)
	ask := term.desk.Interviewer(gate.Target{Channel: term.con, Chat: console.Chat})
	q := approvalQuestion("review-3", false)
	q.TimeoutSeconds = 0.2
	a, err := ask.Ask(ctx, q)
	if err != nil || a.Kind != engine.AnswerTimeout {
		t.Fatalf("Ask = %+v, %v; want a timeout answer", a, err)
	}
	term.waitFor("⌛ Timed out.")
}

func TestConsoleCommands(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	term := newTerminal(t, ctx)

	term.typeLine("/pipeline run feature Add RSI --verbosity verbose")
	in := <-term.inbound
	want := channels.Command{Kind: channels.CmdRunNamed, Name: "feature", Goal: "Add RSI", Verbosity: channels.VerbosityVerbose}
	if in.Kind != channels.KindCommand || in.Command == nil || *in.Command != want {
		t.Fatalf("got %+v, want command %+v", in, want)
	}

	term.typeLine("/pipeline help")
	term.waitFor("Usage:")
	term.typeLine("/pipeline lsit")
	term.waitFor(`did you mean "list"?`)
	select {
	case in := <-term.inbound:
		t.Errorf("help and a bad command must not reach the host, got %+v", in)
	default:
	}
}

// "Approve" and "Abort" both get the accelerator key A: typing A would not
// say which is meant, so the console asks for the name, and the answer it
// hands over names Abort alone (the engine would read a bare "A" as Approve).
func TestConsoleSharedKeyAsksForTheName(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	term := newTerminal(t, ctx)
	q := approvalQuestion("deploy-1", false)
	q.Options = []engine.Option{{Key: "A", Label: "[A] Approve", To: "ship"}, {Key: "A", Label: "Abort", To: "stop"}}
	answers := term.ask(ctx, q)
	term.waitFor("[A] Abort")
	term.typeLine("a")
	term.waitFor("(a is the key of more than one choice: type the choice's name)")
	term.typeLine("abort")
	a := <-answers
	if a.Kind != engine.AnswerValue || a.Value != "Abort" {
		t.Errorf("answer = %+v, want the value Abort (naming that option alone)", a)
	}
}

// Every typed message has an id of its own — also across a restart of the
// console — so the host can store it and answer it after a crash. A reply
// to it is printed flush left, a run's story indented under its card.
func TestConsoleMessagesHaveIDsUniqueAcrossRestarts(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := map[string]bool{}
	for restart := range 2 {
		term := newTerminal(t, ctx)
		for _, line := range []string{"hello", "hello"} {
			term.typeLine(line)
			in := <-term.inbound
			if in.Kind != channels.KindMessage || in.MsgID == "" {
				t.Fatalf("console %d: %+v; want a message with an id", restart, in)
			}
			if seen[in.MsgID] {
				t.Fatalf("console %d: id %q given twice", restart, in.MsgID)
			}
			seen[in.MsgID] = true
			if _, err := term.con.Post(ctx, console.Chat, in.MsgID, channels.Message{Text: "reply to " + in.MsgID}); err != nil {
				t.Fatal(err)
			}
			if lines := term.waitFor("reply to " + in.MsgID); !strings.HasPrefix(lines[len(lines)-1], "reply") {
				t.Errorf("reply printed as %q; want it flush left", lines[len(lines)-1])
			}
		}
		card, _ := term.con.Post(ctx, console.Chat, "", channels.Message{Text: "[Pipeline] Demo"})
		term.con.Post(ctx, console.Chat, card, channels.Message{Text: "→ plan"})
		if lines := term.waitFor("→ plan"); lines[len(lines)-1] != "  → plan" {
			t.Errorf("thread message printed as %q; want it indented under its card", lines[len(lines)-1])
		}
	}
}
