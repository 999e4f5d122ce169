package slack_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"nanohost/internal/channels"
	"nanohost/internal/channels/report"
	"nanohost/internal/channels/slacktest"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runlog"
	"nanohost/internal/runs"
	"nanohost/internal/testkit"
)

// Gates through Slack with the runs service deciding are tested on the
// real host (internal/host/gates_slack_test.go); here, what the transport
// does: a prompt rendered as buttons, a click delivered as an answer.

// postPrompt posts g's prompt in a thread of opsChat, as a run's thread does.
func (h *harness) postPrompt(g runs.Gate) slacktest.Message {
	h.t.Helper()
	root, err := h.ch.Post(h.ctx, opsChat, "", channels.Message{Text: "[Pipeline] Many"})
	if err != nil {
		h.t.Fatal(err)
	}
	ts, err := h.ch.Post(h.ctx, opsChat, root, channels.Message{Text: runlog.PromptText(g.Question()), Gate: &g})
	if err != nil {
		h.t.Fatal(err)
	}
	m, ok := h.fake.Message(opsChat, ts)
	if !ok {
		h.t.Fatalf("prompt %s not in the fake", ts)
	}
	return m
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
	prompt := h.postPrompt(runs.NewGate(q, "nonce-many", time.Now()))

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
	in := h.nextInbound()
	want := runs.GateAnswer{RunID: "run-many", GateID: "pick-1", Nonce: "nonce-many", Option: 28}
	if in.Kind != channels.KindGateAnswer || in.Gate == nil || *in.Gate != want || in.User != alice || in.MsgID != prompt.TS {
		t.Errorf("click on the 28th button delivered %+v; want %+v", in, want)
	}
}

// asked is a gate whose prompt a test posted in a run's thread. What the
// channel delivers for it — a click on one of its buttons, a reply in its
// thread — comes here; deciding who may answer and which answer wins is
// the runs service's, tested on the real host.
type asked struct {
	h       *harness
	r       *report.Reporter
	gate    runs.Gate
	chat    string
	thread  string
	answers chan channels.Inbound
}

// gateRun starts a run's thread in opsChat and asks q in it.
func (h *harness) gateRun(runID, startedBy string, q engine.Question) (*report.Reporter, *asked, slacktest.Message) {
	h.t.Helper()
	r := h.startReporter(opsChat, runID, runs.VerbosityStandard)
	a := h.ask(r, opsChat, q)
	return r, a, h.promptIn(opsChat, a.thread, 1)
}

// ask posts q's prompt in r's thread in chat, as the runs service does.
func (h *harness) ask(r *report.Reporter, chat string, q engine.Question) *asked {
	h.t.Helper()
	thread, err := r.Thread(h.ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	a := &asked{h: h, r: r, chat: chat, thread: thread, answers: make(chan channels.Inbound, 1000),
		gate: runs.NewGate(q, fmt.Sprintf("n%d", time.Now().UnixNano()), time.Now())}
	h.mu.Lock()
	h.asked = append(h.asked, a)
	h.mu.Unlock()
	go func() {
		if ts, err := r.Ask(h.ctx, a.gate); err == nil {
			h.mu.Lock()
			a.gate.MessageTS = ts
			h.mu.Unlock()
		}
	}()
	return a
}

// askedFor is the gate in answers, if any: a click on its buttons or a
// reply in its thread.
func (h *harness) askedFor(in channels.Inbound) *asked {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, a := range h.asked {
		switch {
		case in.Kind == channels.KindGateAnswer && in.Gate != nil && in.Gate.RunID == a.gate.RunID && in.Gate.GateID == a.gate.GateID:
			return a
		case in.Kind == channels.KindMessage && in.Chat == a.chat && in.Thread == a.thread:
			return a
		}
	}
	return nil
}

// next is the next answer delivered for the gate.
func (a *asked) next(t *testing.T) channels.Inbound {
	t.Helper()
	select {
	case in := <-a.answers:
		return in
	case <-time.After(waitLong):
		t.Fatal("no answer to the gate reached the host")
		return channels.Inbound{}
	}
}

// wait takes the next answer delivered for the gate and settles the gate
// with it, as the runs service does with the answer that wins. It returns
// the chosen option's key, or the free text.
func (a *asked) wait(t *testing.T) (channels.Inbound, string) {
	t.Helper()
	in := a.next(t)
	var g runs.Gate
	testkit.WaitUntil(t, waitLong, "the prompt's post returns", func() bool {
		a.h.mu.Lock()
		defer a.h.mu.Unlock()
		g = a.gate
		return g.MessageTS != ""
	})
	g.Status, g.AnsweredBy, g.AnsweredAt = runs.GateAnswered, in.User, time.Now()
	if in.Gate != nil && in.Gate.Option >= 1 && in.Gate.Option <= len(g.Choices) {
		g.Option, g.Answer = in.Gate.Option, g.Choices[in.Gate.Option-1].Key
	} else {
		g.Answer = in.Text
		for i, o := range g.Choices {
			if o.Freeform {
				g.Option = i + 1
			}
		}
	}
	if err := a.r.Settle(a.h.ctx, g, ""); err != nil {
		t.Errorf("settle the prompt: %v", err)
	}
	return in, g.Answer
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

// A gate asked again because the answer before named no option says why
// in its prompt, in runlog's words (Slack only escapes them), and still
// says it once the prompt is replaced by its outcome.
func TestAReAskSaysWhyInItsPromptAndItsOutcome(t *testing.T) {
	h := newHarness(t)
	q := reviewQuestion("run-again", "review-1.1")
	q.Unmatched = "ship <it> & go"
	const why = `"ship &lt;it&gt; &amp; go" matches none of the options ([A] Approve, [R] Reject). Ship the RSI change?`
	_, a, prompt := h.gateRun("run-again", alice, q)
	if !strings.Contains(prompt.BlockText(), "❓ "+why) {
		t.Errorf("the re-ask's prompt does not say why it asks again:\n%s", prompt.BlockText())
	}
	h.click(prompt, alice, "Approve")
	a.wait(t)
	if done := h.settledPrompt(prompt, "chose"); !strings.Contains(done.BlockText(), "❓ "+why) {
		t.Errorf("the settled re-ask lost why it was asked again:\n%s", done.BlockText())
	}
}
