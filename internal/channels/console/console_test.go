package console_test

import (
	"bufio"
	"context"
	"io"
	"reflect"
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

// A prompt at the console says how to answer it — a key on its own, or
// /pipeline answer with the run's short id — and a typed line is handed to
// the host as a message: the host decides whether it answers a gate
// (internal/host's answerTyped), since only the store knows how many wait.
// Once the gate is settled the console prints who chose what.
func TestConsolePromptSaysHowToAnswer(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	term := newTerminal(t, ctx)
	if !term.con.Capabilities().TypedAnswers {
		t.Fatal("the console must declare that typed keys answer gates")
	}
	g := approvalGate("review-1", true)
	msg := term.show(ctx, g)
	term.waitFor("❓ Ship the RSI change?")
	term.waitFor("[A] Approve   [R] Reject")
	term.waitFor("Answer: type A or R, or /pipeline answer run-1 A, or /pipeline answer run-1 <your text> to answer Other")

	term.typeLine("r")
	if in := term.next(); in.Kind != channels.KindMessage || in.Text != "r" || in.MsgID == "" {
		t.Fatalf("typed r: %+v; want a message for the host to decide on", in)
	}
	g.Status, g.Option, g.Answer, g.AnsweredBy, g.AnsweredAt = runs.GateAnswered, 2, "R", console.User, time.Now()
	res := runlog.ResolutionOf(g, g.AnsweredBy, "")
	if err := term.con.Update(ctx, console.Chat, msg, channels.Message{Text: res.Text(), Resolved: &res}); err != nil {
		t.Fatal(err)
	}
	term.waitFor("✓ you chose [R] Reject")
}

// Each line of a run's story carries the run's short id, so two runs
// going at once can be told apart; the card says where the dashboard is.
func TestConsoleMarksEachRunsLinesWithItsID(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	term := newTerminal(t, ctx)
	post := func(thread string, m channels.Message) string {
		id, err := term.con.Post(ctx, console.Chat, thread, m)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	cardA, cardB := runlog.NewCard("pipeline-1700000000-aaaa11", "Ship", ""), runlog.NewCard("pipeline-1700000001-bbbb22", "Ship", "")
	a := post("", channels.Message{Text: cardA.Text(), Card: &cardA, Links: []channels.Link{{Text: "Dashboard", URL: "http://127.0.0.1:8080/runs/pipeline-1700000000-aaaa11"}}})
	if lines := term.waitFor("Dashboard"); !strings.Contains(strings.Join(lines, "\n"), "[Pipeline] Ship · aaaa11 — ▶ running") ||
		lines[len(lines)-1] != "   Dashboard: http://127.0.0.1:8080/runs/pipeline-1700000000-aaaa11" {
		t.Errorf("the card printed as:\n%s", strings.Join(lines, "\n"))
	}
	b := post("", channels.Message{Text: cardB.Text(), Card: &cardB})
	post(a, channels.Message{Text: "→ Build (1/3)"})
	post(b, channels.Message{Text: "→ Build (1/3)", Detail: "compiling"})
	if lines := term.waitFor("aaaa11 → Build"); lines[len(lines)-1] != "  aaaa11 → Build (1/3)" {
		t.Errorf("run A's line printed as %q", lines[len(lines)-1])
	}
	if lines := term.waitFor("│ compiling"); strings.Join(lines[len(lines)-2:], "\n") != "  bbbb22 → Build (1/3)\n  bbbb22   │ compiling" {
		t.Errorf("run B's lines printed as:\n%s", strings.Join(lines, "\n"))
	}
}

// A pipeline pasted over several lines after /pipeline — plain or in a
// code fence — is read to its end and handed over as one command; braces
// in its strings do not end it early; a line with only . abandons one.
func TestConsoleReadsAPastedPipelineToItsEnd(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	term := newTerminal(t, ctx)
	for _, paste := range []string{
		"/pipeline digraph Paste {\n  graph [goal=\"keep } in a label\"]\n\n  start [shape=Mdiamond]\n  done [shape=Msquare]\n  start -> done\n}",
		"/pipeline --verbosity verbose ```dot\ndigraph Paste {\n  start [shape=Mdiamond]\n  done [shape=Msquare]\n  start -> done\n}\n```",
	} {
		for line := range strings.SplitSeq(paste, "\n") {
			term.typeLine(line)
		}
		in := term.next()
		if in.Kind != channels.KindCommand || in.Command.Kind != channels.CmdRunDOT || !strings.Contains(in.Command.DOT, "start -> done") ||
			!strings.HasSuffix(strings.TrimSpace(in.Command.DOT), "}") {
			t.Fatalf("pasted %q: got %+v; want one run command with the whole pipeline", paste, in)
		}
	}
	term.typeLine("/pipeline validate digraph Half {")
	term.typeLine("  a -> b")
	term.typeLine(".")
	term.waitFor("(the pasted pipeline was abandoned)")
	term.typeLine("hello")
	if in := term.next(); in.Kind != channels.KindMessage || in.Text != "hello" {
		t.Errorf("after an abandoned paste, got %+v; want the next line as a message", in)
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
	if in.Kind != channels.KindCommand || in.Command == nil || !reflect.DeepEqual(*in.Command, want) {
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

// Issue 30, item 16: the agent's chat replies are labelled as the agent's,
// apart from the host's own lines (a command's answer, a notice).
func TestConsoleLabelsTheAgentsReplies(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	term := newTerminal(t, ctx)
	if _, err := term.con.Post(ctx, console.Chat, "", channels.Message{Text: "Sure.\nHere is the plan.", AnswerTo: "in-1-1"}); err != nil {
		t.Fatal(err)
	}
	lines := term.waitFor("Here is the plan.")
	if got := strings.Join(lines[len(lines)-2:], "\n"); got != "🤖 agent: Sure.\n   Here is the plan." {
		t.Errorf("the agent's reply printed as:\n%s", got)
	}
	if _, err := term.con.Post(ctx, console.Chat, "", channels.Message{Text: "Recent runs: none"}); err != nil {
		t.Fatal(err)
	}
	if lines := term.waitFor("Recent runs"); strings.Contains(lines[len(lines)-1], "agent") {
		t.Errorf("a host line is labelled as the agent's: %q", lines[len(lines)-1])
	}
}
