package slack_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"nanohost/internal/channels"
	"nanohost/internal/channels/gate"
	"nanohost/internal/channels/report"
	"nanohost/internal/channels/slack"
	"nanohost/internal/channels/slacktest"
	"nanohost/internal/pipeline/engine"
)

// gateRun starts a run thread and asks q in it.
func (h *harness) gateRun(runID, startedBy string, q engine.Question) (*report.Reporter, *asked, slacktest.Message) {
	h.t.Helper()
	r := h.startReporter(opsChat, runID, channels.VerbosityStandard)
	a := h.ask(h.ctx, gate.Target{Channel: h.ch, Chat: opsChat, Thread: r, StartedBy: startedBy}, q)
	thread, err := r.Thread(h.ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	return r, a, h.promptIn(opsChat, thread, 1)
}

func (h *harness) click(m slacktest.Message, user, label string) {
	h.t.Helper()
	if _, err := h.fake.ClickButton(opsChat, m.TS, user, buttonLabeled(h.t, m, label)); err != nil {
		h.t.Fatal(err)
	}
}

// settledPrompt waits until the prompt has been edited to its outcome.
func (h *harness) settledPrompt(m slacktest.Message, want string) slacktest.Message {
	h.t.Helper()
	var now slacktest.Message
	ok := h.fake.WaitFor(waitLong, func() bool {
		now, _ = h.fake.Message(opsChat, m.TS)
		return strings.Contains(now.Content(), want)
	})
	if !ok {
		h.t.Fatalf("prompt never showed %q:\n%s", want, now.Content())
	}
	if len(now.Buttons()) != 0 {
		h.t.Errorf("settled prompt still has buttons: %+v", now.Buttons())
	}
	return now
}

func TestGateAnsweredByButton(t *testing.T) {
	h := newHarness(t)
	_, a, prompt := h.gateRun("run-g", alice, reviewQuestion("run-g", "review-1"))
	if got := len(prompt.Buttons()); got != 2 {
		t.Fatalf("prompt has %d buttons, want one per choice:\n%s", got, prompt.Content())
	}
	for _, label := range []string{"[A] Approve", "[R] Reject"} {
		buttonLabeled(t, prompt, label) // accelerator keys shown
	}
	h.click(prompt, alice, "Approve")
	ans, err := a.wait(t)
	if err != nil || ans.Kind != engine.AnswerValue || ans.Value != "A" || ans.By != alice {
		t.Fatalf("answer = %+v, %v; want A by alice", ans, err)
	}
	h.settledPrompt(prompt, "<@U0ALICE> chose *[A] Approve*")
}

func TestGateRefusesUnauthorizedUsers(t *testing.T) {
	h := newHarness(t)
	_, a, prompt := h.gateRun("run-u", alice, reviewQuestion("run-u", "review-1"))

	h.click(prompt, mallory, "Approve")
	h.waitEphemeral(opsChat, mallory, "not allowed to answer gates here (slack.policy.approvers)")
	a.pending(t)
	if now, _ := h.fake.Message(opsChat, prompt.TS); len(now.Buttons()) != 2 {
		t.Error("a refused click must leave the prompt open")
	}
	// A thread reply is never an approval either.
	if _, err := h.fake.Reply(opsChat, prompt.ThreadTS, alice, "A"); err != nil {
		t.Fatal(err)
	}
	h.waitEphemeral(opsChat, alice, "does not answer this gate; use its buttons")
	a.pending(t)

	h.click(prompt, bob, "Reject") // bob is an approver through group:S0SRE
	if ans, _ := a.wait(t); ans.Value != "R" || ans.By != bob {
		t.Errorf("answer = %+v, want R by bob", ans)
	}
}

func TestGateFirstAnswerWins(t *testing.T) {
	h := newHarness(t)
	_, a, prompt := h.gateRun("run-2x", alice, reviewQuestion("run-2x", "review-1"))
	h.click(prompt, alice, "Approve")
	h.click(prompt, bob, "Reject") // a moment later, from a client still showing buttons
	if ans, _ := a.wait(t); ans.Value != "A" || ans.By != alice {
		t.Errorf("answer = %+v, want alice's A (the first)", ans)
	}
	h.waitEphemeral(opsChat, bob, "Already answered by Alice: [A] Approve")
	if e := h.fake.Ephemerals(opsChat, bob); e[len(e)-1].ThreadTS != prompt.ThreadTS {
		t.Errorf("bob was told in thread %q; he clicked in the run's thread %s, where he is looking", e[len(e)-1].ThreadTS, prompt.ThreadTS)
	}
	h.settledPrompt(prompt, "<@U0ALICE> chose")
}

func TestStaleButtonOfAnEarlierPromptIsIgnored(t *testing.T) {
	h := newHarness(t)
	r := h.startReporter(opsChat, "run-s", channels.VerbosityStandard)
	target := gate.Target{Channel: h.ch, Chat: opsChat, Thread: r, StartedBy: alice}
	q := reviewQuestion("run-s", "review-1")
	thread, _ := r.Thread(h.ctx)

	// The host stops while the gate waits; the resumed run asks it again.
	firstCtx, stop := context.WithCancel(h.ctx)
	first := h.ask(firstCtx, target, q)
	old := h.promptIn(opsChat, thread, 1)
	stop()
	if _, err := first.wait(t); err == nil {
		t.Fatal("Ask must return ctx's error when the run stops")
	}
	h.settledPrompt(old, "The run stopped before anyone answered.")
	second := h.ask(h.ctx, target, q)
	current := h.promptIn(opsChat, thread, 2)

	h.click(old, alice, "Approve") // a button rendered before the restart
	h.waitEphemeral(opsChat, alice, "belongs to an older prompt")
	second.pending(t)
	h.click(current, alice, "Reject")
	if ans, _ := second.wait(t); ans.Value != "R" {
		t.Errorf("answer = %+v, want R from the current prompt", ans)
	}
}

func TestConcurrentRunsButtonsNeverCross(t *testing.T) {
	h := newHarness(t)
	// Two runs of the same pipeline: same node, same gate id.
	_, runA, promptA := h.gateRun("run-A", alice, reviewQuestion("run-A", "review-1"))
	_, runB, promptB := h.gateRun("run-B", alice, reviewQuestion("run-B", "review-1"))
	if promptA.ThreadTS == promptB.ThreadTS {
		t.Fatal("two runs share a thread")
	}

	h.click(promptB, bob, "Reject")
	if ans, _ := runB.wait(t); ans.Value != "R" {
		t.Errorf("run B answer = %+v, want R", ans)
	}
	runA.pending(t)

	// Run B's button value replayed against run A's message still names
	// run B (settled), so it cannot answer run A.
	bButton := buttonLabeled(t, promptB, "Approve")
	if _, err := h.fake.ClickButton(opsChat, promptA.TS, alice, bButton); err != nil {
		t.Fatal(err)
	}
	h.waitEphemeral(opsChat, alice, "Already answered by Bob")
	runA.pending(t)

	h.click(promptA, alice, "Approve")
	if ans, _ := runA.wait(t); ans.Value != "A" || ans.By != alice {
		t.Errorf("run A answer = %+v, want A by alice", ans)
	}
}

func TestGateTimesOutToTheEngineDefault(t *testing.T) {
	h := newHarness(t)
	q := reviewQuestion("run-t", "review-1")
	q.TimeoutSeconds = 0.3
	_, a, prompt := h.gateRun("run-t", alice, q)
	if !strings.Contains(prompt.Content(), "Times out in 300ms") {
		t.Errorf("prompt does not say it times out:\n%s", prompt.Content())
	}
	if ans, err := a.wait(t); err != nil || ans.Kind != engine.AnswerTimeout {
		t.Fatalf("answer = %+v, %v; want a timeout (the engine then applies human.default_choice)", ans, err)
	}
	h.settledPrompt(prompt, "⌛ Timed out.")
	h.click(prompt, alice, "Approve")
	h.waitEphemeral(opsChat, alice, "already timed out")
}

func TestFreeformGateTakesAThreadReply(t *testing.T) {
	h := newHarness(t)
	q := reviewQuestion("run-f", "review-1")
	q.Options = append(q.Options, engine.Option{Label: "Something else", To: "replan", Freeform: true})
	_, a, prompt := h.gateRun("run-f", alice, q)
	if !strings.Contains(prompt.Content(), "Reply in this thread with text to answer *Something else*") {
		t.Errorf("freeform hint missing:\n%s", prompt.Content())
	}
	if n := len(prompt.Buttons()); n != 2 {
		t.Errorf("%d buttons; the freeform edge is a reply, not a button", n)
	}
	if _, err := h.fake.Reply(opsChat, prompt.ThreadTS, mallory, "ship it anyway"); err != nil {
		t.Fatal(err)
	}
	h.waitEphemeral(opsChat, mallory, "not allowed to answer gates")
	if _, err := h.fake.Reply(opsChat, prompt.ThreadTS, bob, "split it into <two> PRs"); err != nil {
		t.Fatal(err)
	}
	ans, _ := a.wait(t)
	if ans.Kind != engine.AnswerText || ans.Text != "split it into <two> PRs" || ans.By != bob {
		t.Errorf("answer = %+v, want bob's text", ans)
	}
	h.settledPrompt(prompt, "<@U0BOB> chose *Something else*: split it into &lt;two&gt; PRs")
}

func TestSelfApprovalCanBeTurnedOff(t *testing.T) {
	h := newHarness(t, withConfig(func(c *slack.Config) { c.Policy.PreventSelfApproval = true }))
	_, a, prompt := h.gateRun("run-self", alice, reviewQuestion("run-self", "review-1"))
	h.click(prompt, alice, "Approve")
	h.waitEphemeral(opsChat, alice, "you started this run, and self-approval is turned off")
	a.pending(t)
	h.click(prompt, bob, "Approve")
	if ans, _ := a.wait(t); ans.By != bob {
		t.Errorf("answer = %+v, want bob's", ans)
	}
}

func TestPerGateApproversNarrowThePolicy(t *testing.T) {
	h := newHarness(t)
	q := reviewQuestion("run-ap", "deploy-1")
	q.Approvers = "group:" + sreGroup
	_, a, prompt := h.gateRun("run-ap", alice, q)
	if !strings.Contains(prompt.Content(), "Approvers: <!subteam^S0SRE>") {
		t.Errorf("prompt does not name its approvers:\n%s", prompt.Content())
	}
	h.click(prompt, alice, "Approve") // a policy approver, but not in SRE
	h.waitEphemeral(opsChat, alice, "only this gate's approvers may answer it")
	a.pending(t)
	h.click(prompt, bob, "Approve")
	if ans, _ := a.wait(t); ans.By != bob {
		t.Errorf("answer = %+v, want bob's", ans)
	}
}

// A gate with more choices than an actions block holds (25) and labels
// longer than a button shows (75) still posts as buttons a phone can tap:
// split over several actions blocks, labels cut, each value small. The
// fake refuses blocks real Slack would refuse.
func TestManyLongChoicesFitSlacksButtonLimits(t *testing.T) {
	h := newHarness(t)
	q := reviewQuestion("run-many", "pick-1")
	q.Options = nil
	for i := range 30 {
		label := fmt.Sprintf("[K%02d] deploy to region %02d %s", i, i, strings.Repeat("with a long explanation ", 4))
		q.Options = append(q.Options, engine.Option{Key: fmt.Sprintf("K%02d", i), Label: label, To: fmt.Sprintf("region%02d", i)})
	}
	q.Options[29].Label = strings.Repeat("🌍", 1200) // and one label far beyond every limit
	_, a, prompt := h.gateRun("run-many", alice, q)

	if len(prompt.Blocks) == 0 {
		t.Fatal("the prompt lost its blocks: Slack refused them")
	}
	buttons := prompt.Buttons()
	if len(buttons) != 30 {
		t.Fatalf("%d buttons, want one per choice (30)", len(buttons))
	}
	var blocks []struct {
		Type     string            `json:"type"`
		Elements []json.RawMessage `json:"elements"`
	}
	_ = json.Unmarshal(prompt.Blocks, &blocks)
	actions := 0
	for _, b := range blocks {
		if b.Type == "actions" {
			actions++
		}
	}
	if actions != 2 {
		t.Errorf("%d actions blocks, want 30 buttons split as 25 + 5", actions)
	}
	if b := buttons[3]; !strings.HasPrefix(b.Text, "[K03] deploy to region 03") || !strings.HasSuffix(b.Text, "…") {
		t.Errorf("a long label should be cut to fit with an ellipsis, got %q", b.Text)
	}
	for _, b := range buttons {
		if len(b.Value) > 200 {
			t.Errorf("button value is %d bytes; it should stay small whatever the label", len(b.Value))
		}
	}
	if _, err := h.fake.ClickButton(opsChat, prompt.TS, alice, buttons[27]); err != nil {
		t.Fatal(err)
	}
	if ans, _ := a.wait(t); ans.Value != "K27" {
		t.Errorf("answer = %+v, want K27 (the 28th button)", ans)
	}
}

// A gate never waits for Slack: while the prompt is held up by a rate
// limit the gate is open and its timeout runs; the prompt, once posted,
// shows at once how the gate ended.
func TestRateLimitedPromptDoesNotHoldUpTheGate(t *testing.T) {
	t.Parallel() // waits on timers, not the CPU
	h := newHarness(t)
	r := h.startReporter(opsChat, "run-rl", channels.VerbosityStandard)
	thread, err := r.Thread(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	h.fake.RateLimit("chat.postMessage", 1, 3) // the prompt waits 3 s
	q := reviewQuestion("run-rl", "review-1")
	q.TimeoutSeconds = 0.3
	a := h.ask(h.ctx, gate.Target{Channel: h.ch, Chat: opsChat, Thread: r, StartedBy: alice}, q)
	ans, err := a.wait(t)
	if err != nil || ans.Kind != engine.AnswerTimeout {
		t.Fatalf("answer = %+v, %v; want the timeout", ans, err)
	}
	if n := len(h.fake.Thread(opsChat, thread)); n != 0 {
		t.Fatalf("%d messages in the thread when the gate timed out; the prompt should still be held up by the rate limit", n)
	}
	prompt := h.promptIn(opsChat, thread, 1)
	h.settledPrompt(prompt, "⌛ Timed out.")
	if n := len(h.fake.Thread(opsChat, thread)); n != 1 {
		t.Errorf("%d messages in the thread, want the one prompt", n)
	}
}

// A prompt Slack refuses for good does not fail the run: the gate stays
// open (the web dashboard can answer it) until its timeout.
func TestRefusedPromptLeavesTheGateOpen(t *testing.T) {
	h := newHarness(t)
	r := h.startReporter(opsChat, "run-refused", channels.VerbosityStandard)
	if _, err := r.Thread(h.ctx); err != nil {
		t.Fatal(err)
	}
	h.fake.Fail("chat.postMessage", 1, slacktest.Fault{Error: "restricted_action"})
	q := reviewQuestion("run-refused", "review-1")
	q.TimeoutSeconds = 0.5
	a := h.ask(h.ctx, gate.Target{Channel: h.ch, Chat: opsChat, Thread: r, StartedBy: alice}, q)
	if ans, err := a.wait(t); err != nil || ans.Kind != engine.AnswerTimeout {
		t.Errorf("answer = %+v, %v; want the gate to time out, not the run to fail", ans, err)
	}
}

// logRecords collects JSON log records, safe for concurrent writers.
type logRecords struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logRecords) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logRecords) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// find returns the records whose fields include every one of want.
func (l *logRecords) find(want map[string]any) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for line := range strings.SplitSeq(l.buf.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		match := true
		for k, v := range want {
			match = match && rec[k] == v
		}
		if match {
			out = append(out, rec)
		}
	}
	return out
}

// Every authorization decision is logged with who, where, which run, gate
// and choice, and whether it was allowed: refusals as well as the answer
// that won.
func TestEveryDecisionIsLogged(t *testing.T) {
	logs := &logRecords{}
	h := newHarness(t, withConfig(func(c *slack.Config) { c.Logger = slog.New(slog.NewJSONHandler(logs, nil)) }))
	_, a, prompt := h.gateRun("run-log", alice, reviewQuestion("run-log", "review-1"))
	h.click(prompt, mallory, "Approve")
	h.waitEphemeral(opsChat, mallory, "not allowed to answer gates")
	h.click(prompt, bob, "Reject")
	if _, err := a.wait(t); err != nil {
		t.Fatal(err)
	}
	h.fake.SlashCommand(opsChat, mallory, "cancel run-log")
	h.waitEphemeral(opsChat, mallory, "not allowed to start or change runs")

	for _, want := range []map[string]any{
		{"msg": "slack: authorization", "action": "answer_gate", "allowed": false, "user": mallory, "chat": opsChat, "run": "run-log", "gate": "review-1", "choice": "A"},
		{"msg": "slack: authorization", "action": "answer_gate", "allowed": true, "user": bob, "chat": opsChat, "run": "run-log", "gate": "review-1", "choice": "R"},
		{"msg": "gate answer refused", "user": mallory, "run": "run-log", "gate": "review-1", "choice": "A", "reason": "not authorized"},
		{"msg": "gate answer accepted", "user": bob, "run": "run-log", "gate": "review-1", "choice": "R"},
		{"msg": "slack: authorization", "action": "change_run", "allowed": false, "user": mallory, "chat": opsChat, "run": "run-log", "command": "cancel"},
	} {
		if got := logs.find(want); len(got) != 1 {
			t.Errorf("%d log records with %v, want exactly one", len(got), want)
		}
	}
}
