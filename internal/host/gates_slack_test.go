package host

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"nanohost/internal/channels/slacktest"
	"nanohost/internal/config"
	"nanohost/internal/logtest"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runs"
	"nanohost/internal/testkit"
)

// Human gates through Slack, on the real host: a run started with
// /pipeline asks its gate in its thread; clicks go through the one
// runs.Answer call and its refusals come back to the person who clicked.

const (
	mallory  = "U0MALLORY" // nobody
	bob      = "U0BOB"     // approver through group:S0SRE
	sreGroup = "S0SRE"
	waitLong = 10 * time.Second
)

// reviewDOT asks whether to ship; Approve ships, Reject fixes.
const reviewDOT = `digraph Review {
  start  [shape=Mdiamond]
  review [shape=hexagon, label="Ship the RSI change?" %s]
  ship   [label="Ship", prompt="ship it"]
  fix    [label="Fix", prompt="fix it"]
  done   [shape=Msquare]
  start -> review
  review -> ship [label="[A] Approve"]
  review -> fix  [label="[R] Reject"]
  ship -> done
  fix -> done
}`

// review is reviewDOT with extra attributes on the gate node.
func review(attrs string) string {
	if attrs != "" {
		attrs = ", " + attrs
	}
	return fmt.Sprintf(reviewDOT, attrs)
}

// slackGates is a host on a Slack workspace where alice starts runs and
// approves, bob approves through the SRE user group, mallory may do
// nothing.
type slackGates struct {
	t    *testing.T
	th   *testHost
	fake *slacktest.Server
	logs *logtest.Records
}

func newSlackGates(t *testing.T, policy ...func(*config.SlackPolicy)) *slackGates {
	t.Helper()
	return newSlackGatesWith(t, succeed, func(c *config.Config) {
		for _, p := range policy {
			p(&c.Slack.Policy)
		}
	})
}

// newSlackGatesWith is newSlackGates with agents that answer, and
// configure applied to the host's configuration last.
func newSlackGatesWith(t *testing.T, answer agentFunc, configure func(*config.Config)) *slackGates {
	t.Helper()
	fake := slacktest.New()
	t.Cleanup(fake.Close)
	fake.AddChannel(opsChat, "ops")
	for id, name := range map[string]string{alice: "Alice", bob: "Bob", mallory: "Mallory"} {
		fake.AddUser(id, name)
	}
	fake.SetGroup(sreGroup, bob)
	logs := &logtest.Records{}
	th := launch(t, hostSetup{slack: fake, answer: answer, logger: logs.Logger(),
		configure: func(c *config.Config) {
			c.Slack.Policy = config.SlackPolicy{Channels: []string{opsChat}, Starters: []string{alice}, Approvers: []string{alice, "group:" + sreGroup}}
			c.Groups = []config.Group{{Folder: "main", Name: "Ops", Chat: "slack:" + opsChat, Main: true}}
			configure(c)
		}})
	return &slackGates{t: t, th: th, fake: fake, logs: logs}
}

// start starts dot as alice and returns the run once its thread exists.
func (g *slackGates) start(dot string) runs.Run {
	g.t.Helper()
	before := g.runIDs()
	g.fake.SlashCommand(opsChat, alice, dot)
	var run runs.Run
	testkit.WaitUntil(g.t, waitLong, "the run has a thread", func() bool {
		for _, id := range g.runIDs() {
			if !slices.Contains(before, id) {
				r, err := g.th.store.GetRun(context.Background(), id)
				if err == nil && r.ThreadTS != "" {
					run = r
					return true
				}
			}
		}
		return false
	})
	return run
}

func (g *slackGates) runIDs() []string {
	page, err := g.th.Runs().List(context.Background(), runs.Filter{})
	if err != nil {
		g.t.Fatal(err)
	}
	var ids []string
	for _, r := range page.Runs {
		ids = append(ids, r.ID)
	}
	return ids
}

// prompt waits for the nth gate prompt in the run's thread.
func (g *slackGates) prompt(run runs.Run, nth int) slacktest.Message {
	g.t.Helper()
	var found slacktest.Message
	ok := g.fake.WaitFor(waitLong, func() bool {
		n := 0
		for _, m := range g.fake.Thread(opsChat, run.ThreadTS) {
			if strings.Contains(m.Text, "❓") {
				if n++; n == nth {
					found = m
					return true
				}
			}
		}
		return false
	})
	if !ok {
		g.t.Fatalf("no gate prompt #%d in the thread of %s", nth, run.ID)
	}
	return found
}

func (g *slackGates) click(m slacktest.Message, user, label string) {
	g.t.Helper()
	if _, err := g.fake.ClickButton(opsChat, m.TS, user, buttonLabeled(g.t, m, label)); err != nil {
		g.t.Fatal(err)
	}
}

func buttonLabeled(t *testing.T, m slacktest.Message, label string) slacktest.Button {
	t.Helper()
	for _, b := range m.Buttons() {
		if strings.Contains(b.Text, label) {
			return b
		}
	}
	t.Fatalf("message %s has no button %q (has %+v)", m.TS, label, m.Buttons())
	return slacktest.Button{}
}

// settled waits until the prompt was edited to its outcome, buttons gone.
func (g *slackGates) settled(m slacktest.Message, want string) {
	g.t.Helper()
	var now slacktest.Message
	if !g.fake.WaitFor(waitLong, func() bool {
		now, _ = g.fake.Message(opsChat, m.TS)
		return strings.Contains(now.Content(), want) && len(now.Buttons()) == 0
	}) {
		g.t.Fatalf("prompt never showed %q without buttons:\n%s", want, now.Content())
	}
}

// told waits for an ephemeral to user containing want.
func (g *slackGates) told(user, want string) {
	g.t.Helper()
	ok := g.fake.WaitFor(waitLong, func() bool {
		for _, e := range g.fake.Ephemerals(opsChat, user) {
			if strings.Contains(e.Text, want) {
				return true
			}
		}
		return false
	})
	if !ok {
		g.t.Fatalf("%s was never told %q; told %+v", user, want, g.fake.Ephemerals(opsChat, user))
	}
}

// ended waits for the run to end and returns it, with the nodes it ran.
func (g *slackGates) ended(run runs.Run) (runs.Run, []string) {
	g.t.Helper()
	ctx := context.Background()
	var r runs.Run
	testkit.WaitUntil(g.t, waitLong, "run "+run.ID+" ends", func() bool {
		var err error
		r, err = g.th.store.GetRun(ctx, run.ID)
		return err == nil && r.Status.Finished()
	})
	events, err := g.th.store.Events(ctx, run.ID, 0, 0)
	if err != nil {
		g.t.Fatal(err)
	}
	var nodes []string
	for _, e := range events {
		if e.Type == engine.EventStageStarted && e.Branch == "" {
			nodes = append(nodes, e.NodeID)
		}
	}
	return r, nodes
}

// open asserts the run still waits at its gate, once what could have
// moved it on was handled (the caller waited for its refusal).
func (g *slackGates) open(run runs.Run) {
	g.t.Helper()
	r, err := g.th.store.GetRun(context.Background(), run.ID)
	if err != nil || r.Status != runs.Waiting {
		g.t.Fatalf("run %s is %s (%v); want it still waiting at its gate", run.ID, r.Status, err)
	}
}

func (g *slackGates) answer(run runs.Run) runs.Gate {
	g.t.Helper()
	gates, err := g.th.store.RunGates(context.Background(), run.ID)
	if err != nil || len(gates) == 0 {
		g.t.Fatalf("gates of %s: %v %v", run.ID, gates, err)
	}
	return gates[len(gates)-1]
}

func TestSlackGateAnsweredByButton(t *testing.T) {
	g := newSlackGates(t)
	run := g.start(review(""))
	prompt := g.prompt(run, 1)
	if got := len(prompt.Buttons()); got != 2 {
		t.Fatalf("prompt has %d buttons, want one per choice:\n%s", got, prompt.Content())
	}
	for _, label := range []string{"[A] Approve", "[R] Reject"} {
		buttonLabeled(t, prompt, label) // accelerator keys shown
	}
	g.click(prompt, alice, "Approve")
	if r, nodes := g.ended(run); r.Status != runs.Succeeded || !slices.Contains(nodes, "ship") || slices.Contains(nodes, "fix") {
		t.Fatalf("run %s went %v; want Approve to ship", r.Status, nodes)
	}
	if a := g.answer(run); a.Status != runs.GateAnswered || a.Answer != "A" || a.AnsweredBy != alice {
		t.Errorf("the gate's record: %+v; want A by alice", a)
	}
	g.settled(prompt, "<@U0ALICE> chose *[A] Approve*")
}

// A refused click tells the person why and leaves the gate open: someone
// outside slack.policy.approvers, or a reply where only buttons answer.
func TestSlackGateRefusesUnauthorizedUsers(t *testing.T) {
	g := newSlackGates(t)
	run := g.start(review(""))
	prompt := g.prompt(run, 1)
	g.click(prompt, mallory, "Approve")
	g.told(mallory, "not allowed to answer gates here (slack.policy.approvers)")
	g.open(run)
	if now, _ := g.fake.Message(opsChat, prompt.TS); len(now.Buttons()) != 2 {
		t.Error("a refused click must leave the prompt open")
	}
	if _, err := g.fake.Reply(opsChat, prompt.ThreadTS, alice, "A"); err != nil {
		t.Fatal(err)
	}
	g.told(alice, "does not answer this gate; use its buttons")
	g.open(run)
	g.click(prompt, bob, "Reject") // bob is an approver through group:S0SRE
	if r, nodes := g.ended(run); r.Status != runs.Succeeded || !slices.Contains(nodes, "fix") {
		t.Errorf("run went %v; want bob's Reject to fix", nodes)
	}
	if a := g.answer(run); a.AnsweredBy != bob {
		t.Errorf("answered by %s, want bob", a.AnsweredBy)
	}
}

// Two clicks at once: the first wins in the store; the second is told,
// in the thread where they clicked, who answered first.
func TestSlackGateFirstAnswerWins(t *testing.T) {
	g := newSlackGates(t)
	run := g.start(review(""))
	prompt := g.prompt(run, 1)
	g.click(prompt, alice, "Approve")
	g.click(prompt, bob, "Reject") // a moment later, from a client still showing buttons
	if r, nodes := g.ended(run); r.Status != runs.Succeeded || !slices.Contains(nodes, "ship") {
		t.Errorf("run went %v; want alice's Approve (the first)", nodes)
	}
	g.told(bob, "Already answered by Alice: [A] Approve")
	if e := g.fake.Ephemerals(opsChat, bob); e[len(e)-1].ThreadTS != prompt.ThreadTS {
		t.Errorf("bob was told in thread %q; he clicked in the run's thread %s, where he is looking", e[len(e)-1].ThreadTS, prompt.ThreadTS)
	}
	g.settled(prompt, "<@U0ALICE> chose")
}

// The host stops while a gate waits: its prompt says why it stopped
// counting. After the restart the resumed run asks again in a new prompt;
// a button of the old one answers nothing and says so; the new one's count.
func TestSlackStaleButtonOfAnEarlierPromptIsRefused(t *testing.T) {
	g := newSlackGates(t)
	run := g.start(review(""))
	old := g.prompt(run, 1)
	g.th.stop()
	g.settled(old, "The host stopped before anyone answered; the run asks again when it resumes.")

	second := launch(t, hostSetup{dir: g.th.dir, slack: g.fake, answer: succeed, configure: func(c *config.Config) {
		c.Slack.Policy = config.SlackPolicy{Channels: []string{opsChat}, Starters: []string{alice}, Approvers: []string{alice}}
		c.Groups = []config.Group{{Folder: "main", Name: "Ops", Chat: "slack:" + opsChat, Main: true}}
	}})
	g.th = second
	current := g.prompt(run, 2)
	g.click(old, alice, "Approve") // a button rendered before the restart
	// The resumed run asks the same visit of the gate again (the restart
	// is not a second visit), so the old button is an older posting of it.
	g.told(alice, "That button belongs to an older prompt for this gate")
	g.open(run)
	g.click(current, alice, "Reject")
	if _, nodes := g.ended(run); !slices.Contains(nodes, "fix") || slices.Contains(nodes, "ship") {
		t.Errorf("run went %v; want Reject from the current prompt", nodes)
	}
}

// Two runs of one pipeline ask the same gate id: a button of one never
// answers the other.
func TestSlackConcurrentRunsButtonsNeverCross(t *testing.T) {
	g := newSlackGates(t)
	runA := g.start(review(""))
	promptA := g.prompt(runA, 1)
	runB := g.start(review(""))
	promptB := g.prompt(runB, 1)
	if promptA.ThreadTS == promptB.ThreadTS {
		t.Fatal("two runs share a thread")
	}
	g.click(promptB, bob, "Reject")
	if _, nodes := g.ended(runB); !slices.Contains(nodes, "fix") {
		t.Errorf("run B went %v, want Reject", nodes)
	}
	g.open(runA)
	// Run B's button replayed against run A's message still names run B
	// (settled), so it cannot answer run A.
	if _, err := g.fake.ClickButton(opsChat, promptA.TS, alice, buttonLabeled(t, promptB, "Approve")); err != nil {
		t.Fatal(err)
	}
	g.told(alice, "Already answered by Bob")
	g.open(runA)
	g.click(promptA, alice, "Approve")
	if _, nodes := g.ended(runA); !slices.Contains(nodes, "ship") {
		t.Errorf("run A went %v, want Approve", nodes)
	}
}

// A gate nobody answers times out after the node's timeout; the prompt
// says so, the engine takes human.default_choice, and a late click is
// told the gate timed out.
func TestSlackUnansweredGateTimesOutToTheDefaultChoice(t *testing.T) {
	g := newSlackGates(t)
	run := g.start(review(`timeout="300ms", human.default_choice="Reject"`))
	prompt := g.prompt(run, 1)
	if !strings.Contains(prompt.Content(), "Times out in 300ms") {
		t.Errorf("the prompt does not say when it times out:\n%s", prompt.Content())
	}
	if _, nodes := g.ended(run); !slices.Contains(nodes, "fix") || slices.Contains(nodes, "ship") {
		t.Errorf("a timed-out gate must take human.default_choice (Reject): %v", nodes)
	}
	g.settled(prompt, "⌛ Timed out.")
	g.click(prompt, alice, "Approve")
	g.told(alice, "This gate already timed out.")
}

// A freeform edge is answered by a reply in the run's thread, by an
// approver; the text goes to the run as it was written.
func TestSlackFreeformGateTakesAThreadReply(t *testing.T) {
	g := newSlackGates(t)
	dot := strings.Replace(review(""), "  ship -> done", "  replan [prompt=\"replan\"]\n  review -> replan [label=\"Something else\", freeform=true]\n  replan -> done\n  ship -> done", 1)
	run := g.start(dot)
	prompt := g.prompt(run, 1)
	if !strings.Contains(prompt.Content(), "Reply in this thread with text to answer *Something else*") {
		t.Errorf("freeform hint missing:\n%s", prompt.Content())
	}
	if n := len(prompt.Buttons()); n != 2 {
		t.Errorf("%d buttons; the freeform edge is a reply, not a button", n)
	}
	if _, err := g.fake.Reply(opsChat, prompt.ThreadTS, mallory, "ship it anyway"); err != nil {
		t.Fatal(err)
	}
	g.told(mallory, "not allowed to answer gates")
	if _, err := g.fake.Reply(opsChat, prompt.ThreadTS, bob, "split it into <two> PRs"); err != nil {
		t.Fatal(err)
	}
	if _, nodes := g.ended(run); !slices.Contains(nodes, "replan") {
		t.Errorf("run went %v; want the freeform edge", nodes)
	}
	if a := g.answer(run); !a.TextAnswer() || a.Answer != "split it into <two> PRs" || a.AnsweredBy != bob {
		t.Errorf("the gate's record %+v; want bob's text", a)
	}
	g.settled(prompt, "<@U0BOB> chose *Something else*: split it into &lt;two&gt; PRs")
}

func TestSlackSelfApprovalCanBeTurnedOff(t *testing.T) {
	g := newSlackGates(t, func(p *config.SlackPolicy) { p.PreventSelfApproval = true })
	run := g.start(review(""))
	prompt := g.prompt(run, 1)
	g.click(prompt, alice, "Approve") // alice started it
	g.told(alice, "you started this run, and self-approval is turned off")
	g.open(run)
	g.click(prompt, bob, "Approve")
	if _, nodes := g.ended(run); !slices.Contains(nodes, "ship") {
		t.Errorf("run went %v, want bob's Approve", nodes)
	}
}

func TestSlackPerGateApproversNarrowThePolicy(t *testing.T) {
	g := newSlackGates(t)
	run := g.start(review(`approvers="group:` + sreGroup + `"`))
	prompt := g.prompt(run, 1)
	if !strings.Contains(prompt.Content(), "Approvers: <!subteam^S0SRE>") {
		t.Errorf("prompt does not name its approvers:\n%s", prompt.Content())
	}
	g.click(prompt, alice, "Approve") // a policy approver, but not in SRE
	g.told(alice, "only this gate's approvers may answer it")
	g.open(run)
	g.click(prompt, bob, "Approve")
	g.ended(run)
	if a := g.answer(run); a.AnsweredBy != bob {
		t.Errorf("answered by %s, want bob", a.AnsweredBy)
	}
}

// "Approve" and "Abort" both get the accelerator key A. A click on Abort
// takes the Abort edge: the button names that option by position.
func TestSlackClickedChoiceIsTakenEvenWhenKeysCollide(t *testing.T) {
	g := newSlackGates(t)
	run := g.start(`digraph Deploy {
  start  [shape=Mdiamond]
  review [shape=hexagon, label="Deploy to production?"]
  ship   [label="Ship", prompt="ship it"]
  stop   [label="Stand Down", prompt="stand down"]
  done   [shape=Msquare]
  start -> review
  review -> ship [label="[A] Approve"]
  review -> stop [label="Abort"]
  ship -> done
  stop -> done
}`)
	prompt := g.prompt(run, 1)
	g.click(prompt, alice, "Abort")
	if _, nodes := g.ended(run); !slices.Contains(nodes, "stop") || slices.Contains(nodes, "ship") {
		t.Errorf("clicking Abort must lead to Stand Down, not Ship: %v", nodes)
	}
	g.settled(prompt, "<@U0ALICE> chose *Abort*")
}

// A run tells its story in one thread with its gate as a prompt in it:
// the failure, the loop through the fix, the approval, the end — and the
// card says it succeeded.
func TestSlackRealEngineRunTellsItsStory(t *testing.T) {
	fails := 0
	var mu sync.Mutex
	g := newSlackGates(t)
	g.th.agents.answer = func(ctx context.Context, req engine.Request) (engine.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		if req.NodeID == "test" && fails == 0 {
			fails++
			return engine.Result{Text: "2 tests fail [outcome:fail]"}, nil
		}
		return succeed(ctx, req)
	}
	run := g.start(`digraph Feature {
  graph [goal="Add RSI indicator"]
  start  [shape=Mdiamond]
  plan   [label="Plan", prompt="Plan: $goal"]
  test   [label="Run Tests", prompt="Run the tests"]
  fix    [label="Fix Failures", prompt="Fix the failing tests"]
  review [shape=hexagon, label="Review the change"]
  done   [shape=Msquare]
  start -> plan -> test
  test -> fix    [condition="outcome=fail"]
  test -> review [condition="outcome=success"]
  fix -> test
  review -> done [label="[A] Approve"]
  review -> plan [label="[R] Rework"]
}`)
	g.click(g.prompt(run, 1), alice, "Approve")
	if r, _ := g.ended(run); r.Status != runs.Succeeded {
		t.Fatalf("run %s", r.Status)
	}
	var story strings.Builder
	g.fake.WaitFor(waitLong, func() bool {
		story.Reset()
		for _, m := range g.fake.Thread(opsChat, run.ThreadTS) {
			story.WriteString(m.Content() + "\n")
		}
		return strings.Contains(story.String(), "✓ Pipeline complete")
	})
	all, at := story.String(), 0
	for _, want := range []string{
		"→ Plan (1/", "✓ Plan", "→ Run Tests (2/", "✗ Run Tests", "2 tests fail",
		"⤷ test → fix (it failed: outcome=fail)", "→ Fix Failures", "✓ Fix Failures", "✓ Run Tests",
		"⤷ test → review (when outcome=success)", "→ Review the change",
		"<@U0ALICE> chose *[A] Approve*", "⤷ review → done", "✓ Pipeline complete",
	} {
		i := strings.Index(all[at:], want)
		if i < 0 {
			t.Fatalf("thread lacks %q after position %d:\n%s", want, at, all)
		}
		at += i + len(want)
	}
	if strings.Contains(all, "→ start") || strings.Contains(all, "lexical") {
		t.Errorf("the start node and unconditional edges are not thread news:\n%s", all)
	}
	g.fake.WaitFor(waitLong, func() bool {
		card, _ := g.fake.Message(opsChat, run.ThreadTS)
		return strings.Contains(card.Content(), "✓ succeeded")
	})
	if card, _ := g.fake.Message(opsChat, run.ThreadTS); !strings.Contains(card.Content(), "✓ succeeded") || !strings.Contains(card.Content(), "Goal: Add RSI indicator") {
		t.Errorf("final card:\n%s", card.Content())
	}
}

// A gate never waits for Slack: while its prompt is held up by a rate
// limit the gate is open and its timeout runs; the prompt, once posted,
// shows at once how the gate ended.
func TestSlackRateLimitedPromptDoesNotHoldUpTheGate(t *testing.T) {
	g := newSlackGates(t)
	g.fake.RateLimit("chat.postMessage", 3, 3) // the card and the first thread messages wait 3 s each
	g.fake.SlashCommand(opsChat, alice, review(`timeout="300ms", human.default_choice="Reject"`))
	var run runs.Run
	testkit.WaitUntil(t, waitLong, "the run ends while Slack holds its posts back", func() bool {
		page, _ := g.th.Runs().List(context.Background(), runs.Filter{})
		if len(page.Runs) == 1 && page.Runs[0].Status.Finished() {
			run = page.Runs[0]
			return true
		}
		return false
	})
	if _, nodes := g.ended(run); !slices.Contains(nodes, "fix") {
		t.Errorf("the gate should have timed out to Reject: %v", nodes)
	}
	run, _ = g.th.store.GetRun(context.Background(), run.ID)
	testkit.WaitUntil(t, 20*time.Second, "the thread is posted", func() bool {
		r, _ := g.th.store.GetRun(context.Background(), run.ID)
		run = r
		return r.ThreadTS != ""
	})
	g.settled(g.prompt(run, 1), "⌛ Timed out.")
}

// A prompt Slack refuses does not hold up or fail the run: the gate is
// open in the store (the dashboard can answer it, its timeout runs) while
// the thread keeps trying to post the prompt, and an answer given
// elsewhere moves the run on.
func TestSlackRefusedPromptLeavesTheGateOpen(t *testing.T) {
	release := make(chan struct{})
	g := newSlackGatesWith(t, func(ctx context.Context, req engine.Request) (engine.Result, error) {
		if req.NodeID == "work" {
			select {
			case <-release:
			case <-ctx.Done():
				return engine.Result{}, ctx.Err()
			}
		}
		return engine.Result{Text: "done [outcome:success]"}, nil
	}, func(c *config.Config) { c.Pipelines.DefaultVerbosity = "minimal" })
	run := g.start(strings.Replace(review(""), "start -> review", "start -> work -> review\n  work [prompt=\"work\"]", 1))
	// At minimal verbosity the next post after the card is the prompt.
	g.fake.Fail("chat.postMessage", 1000, slacktest.Fault{Error: "restricted_action"})
	close(release)
	testkit.WaitUntil(t, waitLong, "the gate is open in the store", func() bool {
		r, err := g.th.store.GetRun(context.Background(), run.ID)
		return err == nil && r.Status == runs.Waiting
	})
	refused := g.fake.Calls("chat.postMessage")
	testkit.WaitUntil(t, waitLong, "the thread tries the refused prompt twice more", func() bool {
		return g.fake.Calls("chat.postMessage") >= refused+2
	})
	g.open(run) // refused twice more, the run still waits
	for _, m := range g.fake.Thread(opsChat, run.ThreadTS) {
		if strings.Contains(m.Text, "❓") {
			t.Fatalf("a prompt was posted though Slack refused it: %+v", m)
		}
	}
	gate := g.answer(run)
	if _, err := g.th.WebRuns().Answer(context.Background(), runs.GateAnswer{RunID: run.ID, GateID: gate.GateID, Option: 1},
		runs.Principal{Endpoint: "web", User: "web:ops"}); err != nil {
		t.Fatal(err)
	}
	if r, nodes := g.ended(run); r.Status != runs.Succeeded || !slices.Contains(nodes, "ship") {
		t.Fatalf("run %s went %v; want the web's Approve to ship", r.Status, nodes)
	}
	// The prompt is still being retried: stopping the host waits for it
	// only for the delivery grace (3 s), not for Slack to relent.
	began := time.Now()
	g.th.stop()
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("the host took %v to stop while Slack refused a prompt; want its delivery grace", took)
	}
}

// Every authorization decision is logged with who, where, which run, gate
// and choice, and whether it was allowed: refusals as well as the answer
// that won.
func TestSlackEveryDecisionIsLogged(t *testing.T) {
	g := newSlackGates(t)
	run := g.start(review(""))
	prompt := g.prompt(run, 1)
	g.click(prompt, mallory, "Approve")
	g.told(mallory, "not allowed to answer gates")
	g.click(prompt, bob, "Reject")
	g.ended(run)
	g.fake.SlashCommand(opsChat, mallory, "cancel "+run.ID)
	g.told(mallory, "not allowed to start or change runs")

	for _, want := range []map[string]any{
		{"msg": "slack: authorization", "action": "answer_gate", "allowed": false, "user": mallory, "chat": opsChat, "run": run.ID, "gate": "review-1", "option": 1.0},
		{"msg": "slack: authorization", "action": "answer_gate", "allowed": true, "user": bob, "chat": opsChat, "run": run.ID, "gate": "review-1", "option": 2.0},
		{"msg": "gate answer refused", "by": "slack:" + mallory, "run": run.ID, "gate": "review-1", "choice": "choice #1"},
		{"msg": "gate answer accepted", "by": "slack:" + bob, "run": run.ID, "gate": "review-1", "choice": "choice #2"},
		{"msg": "slack: authorization", "action": "change_run", "allowed": false, "user": mallory, "chat": opsChat, "command": "cancel"},
	} {
		if got := g.logs.Find(want); len(got) != 1 {
			t.Errorf("%d log records with %v, want exactly one", len(got), want)
		}
	}
}

// forged is a gate button as a tampered or outdated client might send it:
// a gate, a posting nonce and an option of its own choosing.
func forged(gate, nonce string, option int) slacktest.Button {
	value, _ := json.Marshal(map[string]any{"r": "", "g": gate, "n": nonce, "o": option})
	return slacktest.Button{ActionID: "nanohost.gate." + nonce + ".0", Value: string(value)}
}

// Every kind of refused click reaches the person who clicked, in the run's
// thread, saying why: no such gate, an older posting, not one of the
// gate's choices, not allowed, already answered — and the gate stays open
// through all but the last.
func TestSlackEveryRefusalReachesWhoClicked(t *testing.T) {
	g := newSlackGates(t)
	run := g.start(review(""))
	prompt := g.prompt(run, 1)
	gate := g.answer(run)
	click := func(user string, b slacktest.Button) {
		t.Helper()
		var v map[string]any
		_ = json.Unmarshal([]byte(b.Value), &v)
		v["r"] = run.ID
		value, _ := json.Marshal(v)
		b.Value = string(value)
		if _, err := g.fake.ClickButton(opsChat, prompt.TS, user, b); err != nil {
			t.Fatal(err)
		}
	}
	click(alice, forged("review-9", gate.Nonce, 1))
	g.told(alice, "That prompt is no longer active.")
	click(alice, forged(gate.GateID, "olderposting", 1))
	g.told(alice, "That button belongs to an older prompt")
	click(alice, forged(gate.GateID, gate.Nonce, 7))
	g.told(alice, "option 7 is not one of this gate's 2 choices")
	g.click(prompt, mallory, "Approve")
	g.told(mallory, "not allowed to answer gates here")
	g.open(run)
	g.click(prompt, bob, "Reject")
	g.click(prompt, alice, "Approve")
	g.told(alice, "Already answered by Bob: [R] Reject")
	for _, e := range g.fake.Ephemerals(opsChat, alice) {
		if e.ThreadTS != run.ThreadTS {
			t.Errorf("%q was told outside the run's thread", e.Text)
		}
	}
}

// On Slack a run's status card names it by its short id and links its
// dashboard page; /pipeline status shows the question it waits on and how
// to answer it there (buttons, or /pipeline answer); /pipeline answer
// takes the start of the short id, answers for an approver and refuses
// anyone else privately. A key typed as a plain message answers nothing:
// chatter in a shared channel never approves.
func TestSlackRunsAreNamedAndAnsweredByCommand(t *testing.T) {
	g := newSlackGates(t)
	run := g.start(review(""))
	short := runs.ShortID(run.ID)
	g.prompt(run, 1)
	card, _ := g.fake.Message(opsChat, run.ThreadTS)
	if content := card.Content(); !strings.Contains(content, "[Pipeline] Review · "+short) ||
		!strings.Contains(content, "<http://"+g.th.HTTPAddr()+"/runs/"+run.ID+"|Dashboard>") {
		t.Errorf("the status card does not name the run and link its page:\n%s", content)
	}

	g.fake.SlashCommand(opsChat, alice, "status "+short)
	if !g.fake.WaitFor(waitLong, func() bool {
		for _, m := range g.fake.TopLevel(opsChat) {
			if c := m.Content(); strings.Contains(c, "Run "+short+": ⏸ waiting") && strings.Contains(c, "❓ Ship the RSI change?") &&
				strings.Contains(c, "Answer: use the buttons in the run's thread, or /pipeline answer "+short+" A") {
				return true
			}
		}
		return false
	}) {
		t.Fatalf("/pipeline status did not show the question and how to answer it; the channel has:\n%v", g.fake.TopLevel(opsChat))
	}

	if _, err := g.fake.Say(opsChat, alice, "A"); err != nil {
		t.Fatal(err)
	}
	g.fake.SlashCommand(opsChat, mallory, "answer "+short[:3]+" A")
	g.told(mallory, "not allowed to answer gates")
	if st, err := g.th.Runs().Status(context.Background(), run.ID); err != nil || len(st.Gates) != 1 {
		t.Fatalf("after a typed A and a refused answer the gate must still wait: %+v, %v", st.Gates, err)
	}
	g.fake.SlashCommand(opsChat, alice, "answer "+short[:3]+" Reject")
	g.told(alice, "✓ Run "+short+": answered [R] Reject.")
	ended, nodes := g.ended(run)
	if ended.Status != runs.Succeeded || !slices.Contains(nodes, "fix") || slices.Contains(nodes, "ship") {
		t.Errorf("run %s went %v; want alice's Reject (fix)", ended.Status, nodes)
	}
}
