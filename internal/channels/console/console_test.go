package console_test

import (
	"bufio"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"nanohost/internal/channels"
	"nanohost/internal/channels/console"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runlog"
	"nanohost/internal/runs"
)

// terminal is a console wired to pipes, the way a person would use it;
// what it delivers arrives on inbound.
type terminal struct {
	t       *testing.T
	typing  *io.PipeWriter
	screen  chan string
	inbound chan channels.Inbound
	con     *console.Console
}

func newTerminal(t *testing.T, ctx context.Context) *terminal {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	term := &terminal{t: t, typing: inW, screen: make(chan string, 1000), inbound: make(chan channels.Inbound, 10)}
	term.con = console.New(inR, outW)
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			term.screen <- sc.Text()
		}
	}()
	go func() { _ = term.con.Run(ctx, func(in channels.Inbound) { term.inbound <- in }) }()
	t.Cleanup(func() { inW.Close(); outW.Close() })
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

// next is the next thing the console delivers to the host.
func (term *terminal) next() channels.Inbound {
	term.t.Helper()
	select {
	case in := <-term.inbound:
		return in
	case <-time.After(5 * time.Second):
		term.t.Fatal("the console delivered nothing")
		return channels.Inbound{}
	}
}

func approvalGate(id string, freeform bool) runs.Gate {
	q := engine.Question{
		ID: id, RunID: "run-1", Stage: "review", Text: "Ship the RSI change?", Type: engine.QuestionMultipleChoice,
		Options: []engine.Option{{Key: "A", Label: "[A] Approve", To: "ship"}, {Key: "R", Label: "[R] Reject", To: "fix"}},
	}
	if freeform {
		q.Options = append(q.Options, engine.Option{Label: "Other", To: "replan", Freeform: true})
	}
	return runs.NewGate(q, "nonce-"+id, time.Now())
}

// show posts a gate's prompt as a run's thread does, returning its message id.
func (term *terminal) show(ctx context.Context, g runs.Gate) string {
	term.t.Helper()
	card, err := term.con.Post(ctx, console.Chat, "", channels.Message{Text: "[Pipeline] Feature"})
	if err != nil {
		term.t.Fatal(err)
	}
	id, err := term.con.Post(ctx, console.Chat, card, channels.Message{Text: runlog.PromptText(g.Question()), Gate: &g})
	if err != nil {
		term.t.Fatal(err)
	}
	return id
}

// A prompt at the console is answered by typing a choice's key: the console
// hands over an answer naming the option by its position and the posting
// by its nonce, and prints how the gate ended once it is settled.
func TestConsoleGateKeysAnswerThePrompt(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	term := newTerminal(t, ctx)
	g := approvalGate("review-1", false)
	msg := term.show(ctx, g)
	term.waitFor("❓ Ship the RSI change?")
	term.waitFor("[A] Approve   [R] Reject")

	term.typeLine("maybe") // not a key: the console says what it wants
	term.waitFor("(type one of the keys above)")
	term.typeLine("r")
	in := term.next()
	want := runs.GateAnswer{RunID: "run-1", GateID: "review-1", Nonce: "nonce-review-1", Option: 2}
	if in.Kind != channels.KindGateAnswer || in.Gate == nil || *in.Gate != want || in.User != console.User || in.MsgID != msg {
		t.Fatalf("typed r: %+v; want the answer %+v to prompt %s", in, want, msg)
	}
	if who := in.Who(); who.Endpoint != "console" || who.User != console.User || who.Chat != console.Chat {
		t.Errorf("the answer comes from %+v", who)
	}

	g.Status, g.Option, g.Answer, g.AnsweredBy, g.AnsweredAt = runs.GateAnswered, 2, "R", console.User, time.Now()
	res := runlog.ResolutionOf(g, g.AnsweredBy, "")
	if err := term.con.Update(ctx, console.Chat, msg, channels.Message{Text: res.Text(), Resolved: &res}); err != nil {
		t.Fatal(err)
	}
	term.waitFor("✓ you chose [R] Reject")
	// After the gate, a typed line is a plain message again.
	term.typeLine("thanks")
	if in := term.next(); in.Kind != channels.KindMessage || in.Text != "thanks" {
		t.Errorf("after the gate, got %+v, want a plain message", in)
	}
}

func TestConsoleFreeformGateTakesText(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	term := newTerminal(t, ctx)
	term.show(ctx, approvalGate("review-2", true))
	term.waitFor("Reply with text to answer Other")
	term.typeLine("split it into two PRs")
	if in := term.next(); in.Gate == nil || in.Gate.Text != "split it into two PRs" || in.Gate.Option != 0 {
		t.Errorf("typed text: %+v, want it as the gate's text answer", in)
	}
}

func TestConsoleShowsATimeout(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	term := newTerminal(t, ctx)
	g := approvalGate("review-3", false)
	msg := term.show(ctx, g)
	g.Status = runs.GateTimedOut
	res := runlog.ResolutionOf(g, "", "")
	if err := term.con.Update(ctx, console.Chat, msg, channels.Message{Text: res.Text(), Resolved: &res}); err != nil {
		t.Fatal(err)
	}
	term.waitFor("⌛ Timed out.")
}

func TestConsoleCommands(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	term := newTerminal(t, ctx)

	term.typeLine("/pipeline run feature Add RSI --verbosity verbose")
	in := <-term.inbound
	want := channels.Command{Kind: channels.CmdRunNamed, Name: "feature", Goal: "Add RSI", Verbosity: runs.VerbosityVerbose}
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
// hands over names Abort by its position.
func TestConsoleSharedKeyAsksForTheName(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	term := newTerminal(t, ctx)
	g := approvalGate("deploy-1", false)
	g.Choices = []engine.Option{{Key: "A", Label: "[A] Approve", To: "ship"}, {Key: "A", Label: "Abort", To: "stop"}}
	term.show(ctx, g)
	term.waitFor("[A] Abort")
	term.typeLine("a")
	term.waitFor("(a is the key of more than one choice: type the choice's name)")
	term.typeLine("abort")
	if in := term.next(); in.Gate == nil || in.Gate.Option != 2 {
		t.Errorf("typed abort: %+v, want option 2 (Abort)", in)
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
			in := term.next()
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
