package host

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"nanohost/internal/config"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runs"
	"nanohost/internal/testkit"
)

// chatOrSucceed answers the group's chat agent with what it heard and
// every pipeline stage with success.
func chatOrSucceed(ctx context.Context, req engine.Request) (engine.Result, error) {
	if req.NodeID == "chat" {
		lines := strings.Split(strings.TrimSpace(req.Prompt), "\n")
		return engine.Result{Text: "agent heard: " + lines[len(lines)-1]}, nil
	}
	return succeed(ctx, req)
}

// consoleSession drives the console on pipes.
type consoleSession struct {
	t  *testing.T
	th *testHost
}

func (c consoleSession) typeLines(text string) {
	c.t.Helper()
	if _, err := io.WriteString(c.th.typing, text+"\n"); err != nil {
		c.t.Fatal(err)
	}
}

// shows waits until the console has printed want (count times in all).
func (c consoleSession) shows(want string, count int) {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(c.th.screen.Text(), want) < count {
		if time.Now().After(deadline) {
			c.t.Fatalf("the console never showed %q %d time(s); it showed:\n%s", want, count, c.th.screen.Text())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waiting lists the n runs waiting at a gate.
func (c consoleSession) waiting(n int) []runs.Run {
	c.t.Helper()
	var list []runs.Run
	testkit.WaitUntil(c.t, 10*time.Second, "runs wait at their gates", func() bool {
		page, err := c.th.Runs().List(context.Background(), runs.Filter{Statuses: []runs.State{runs.Waiting}})
		list = page.Runs
		return err == nil && len(list) == n
	})
	return list
}

// Two runs wait at the console: a key typed on its own does not pick one
// (the console asks which, listing each run's question and the command that
// answers it), a message that is no answer reaches the agent and its reply
// comes back, /pipeline status shows a run's question and how to answer
// it, /pipeline answer takes a short id's prefix and says why it refuses;
// once one run is answered, a key answers the other, the only one left.
func TestConsoleAnswersWhichRunWhenSeveralWait(t *testing.T) {
	th := startTestHost(t, "", chatOrSucceed)
	c := consoleSession{t, th}
	c.typeLines("/pipeline " + review(""))
	c.typeLines("/pipeline " + review(""))
	pair := c.waiting(2)
	first, second := runs.ShortID(pair[0].ID), runs.ShortID(pair[1].ID)
	c.shows("❓ Ship the RSI change?", 2)
	c.shows("[Pipeline] Review · "+first, 1)
	c.shows(first+"    Answer: type A or R, or /pipeline answer "+first+" A", 1)

	c.typeLines("a")
	c.shows(`2 runs are waiting for an answer — which one is "a" for?`, 1)
	c.shows("/pipeline answer "+first+" a", 1)
	c.shows("/pipeline answer "+second+" a", 1)

	c.typeLines("hello there")
	c.shows("agent heard: console: hello there", 1)

	c.typeLines("/pipeline status " + second)
	c.shows("Run "+second+": ⏸ waiting", 1)
	c.shows("Answer: type A or R, or /pipeline answer "+second+" A", 1)
	c.shows("Dashboard: http://"+th.HTTPAddr()+"/runs/"+pair[1].ID, 1)

	c.typeLines("/pipeline answer " + first[:4] + " maybe")
	c.shows(`✗ "maybe" is not one of this gate's choices ([A] Approve, [R] Reject)`, 1)
	c.typeLines("/pipeline answer zzzz A")
	c.shows("✗ no run zzzz here (/pipeline list shows the recent runs)", 1)

	c.typeLines("/pipeline answer " + first[:4] + " Approve")
	c.shows("✓ Run "+first+": answered [A] Approve.", 1)
	testkit.WaitUntil(t, 10*time.Second, "the first run succeeds", func() bool {
		r, err := th.Runs().Find(context.Background(), first, runs.Filter{})
		return err == nil && r.Status == runs.Succeeded
	})
	c.typeLines("/pipeline answer " + first + " A")
	c.shows("✗ Run "+first+" is not waiting for an answer: it is ✓ succeeded.", 1)

	c.typeLines("R")
	testkit.WaitUntil(t, 10*time.Second, "the second run takes R, the only question left", func() bool {
		st, err := th.Runs().Status(context.Background(), pair[1].ID)
		return err == nil && st.Run.Status == runs.Succeeded
	})
	if n := len(th.agents.prompts("fix")); n != 1 || len(th.agents.prompts("ship")) != 1 {
		t.Errorf("ship ran %d times and fix %d; want one each (A for the first run, R for the second)", len(th.agents.prompts("ship")), n)
	}
	if got := th.agents.prompts("chat"); len(got) != 1 {
		t.Errorf("the agent got %q; want only the message that was no answer", got)
	}
}

// /pipeline list names the stored pipelines and the runs, in the same
// state words /pipeline status uses; cancel and resume take a short id
// too; a misspelt pipeline name gets the closest one, and a misspelt
// /pipeline a hint instead of going to the agent.
func TestConsoleListsStoredPipelinesAndCorrectsNames(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "data", "groups", "main")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "release.dot"), []byte(review("")), 0o644); err != nil {
		t.Fatal(err)
	}
	th := startTestHost(t, dir, chatOrSucceed)
	c := consoleSession{t, th}

	c.typeLines("/pipeline run releas")
	c.shows("✗ no pipeline named releas — did you mean release? (/pipeline list shows the stored pipelines)", 1)
	c.typeLines("/pipeline run release")
	run := c.waiting(1)[0]
	short := runs.ShortID(run.ID)

	c.typeLines("/pipeline list")
	c.shows("Stored pipelines (/pipeline run <name>): release", 1)
	c.shows(short+"   ⏸ waiting", 1)
	c.typeLines("/pipeline status " + short)
	c.shows("Run "+short+": ⏸ waiting", 1)

	c.typeLines("/pipeline cancel " + short[:4])
	testkit.WaitUntil(t, 10*time.Second, "the run is cancelled by its short id's prefix", func() bool {
		r, err := th.store.GetRun(context.Background(), run.ID)
		return err == nil && r.Status == runs.Cancelled
	})
	c.typeLines("/pipeline resume " + short)
	c.shows("run "+run.ID+" already ended as cancelled; start a new one", 1)

	c.typeLines("/pipelin list")
	c.shows("/pipelin is not a command — did you mean /pipeline list?", 1)
	c.typeLines("thanks")
	c.shows("agent heard: console: thanks", 1)
	if got := th.agents.prompts("chat"); len(got) != 1 {
		t.Errorf("the agent got %q; a mistyped command must not reach it", got)
	}
}

// Issue 30, item 9: after an answer the thread reads in order — who chose
// what first, then where it led — in people's words: no engine terms
// (preferred_label, fail_condition, only_edge) at the standard verbosity.
func TestThreadTellsTheChoiceBeforeWhereItLeads(t *testing.T) {
	for i := range 5 { // the order was a race: try it a few times
		th := startTestHost(t, "", chatOrSucceed)
		c := consoleSession{t, th}
		c.typeLines("/pipeline " + review(""))
		c.waiting(1)
		c.shows("Answer: type A or R", 1)
		c.typeLines("A")
		c.shows("✓ Pipeline complete", 1)
		screen := th.screen.Text()
		chose, routed, next := strings.Index(screen, "you chose [A] Approve"), strings.Index(screen, "review → ship"), strings.Index(screen, "→ Ship (")
		if chose < 0 || routed < 0 || next < 0 || chose > routed || routed > next {
			t.Fatalf("try %d: the thread does not read choice, route, next stage in order:\n%s", i, screen)
		}
		for _, term := range []string{"preferred_label", "fail_condition", "only_edge"} {
			if strings.Contains(screen, term) {
				t.Errorf("the thread says %q:\n%s", term, screen)
			}
		}
		th.stop()
	}
}

// promtDOT has a misspelt attribute: a warning, not an error.
const promtDOT = `digraph Typo { start [shape=Mdiamond]; work [label="Work", promt="do it"]; done [shape=Msquare]; start -> work -> done }`

// Issue 30, item 3: a pasted pipeline with lint warnings starts, and its
// start is told with the warnings and their fixes; in a group with
// pipelines.strict it is refused with them instead, and nothing runs.
func TestPastedPipelineWarningsShowWithItsStart(t *testing.T) {
	th := startTestHost(t, "", chatOrSucceed)
	c := consoleSession{t, th}
	c.typeLines("/pipeline " + promtDOT)
	c.shows("started, but its pipeline has warnings", 1)
	c.shows(`unknown node attribute "promt"`, 1)
	c.shows("did you mean prompt?", 1)
	c.shows("✓ Pipeline complete", 1)

	strict := launch(t, hostSetup{answer: chatOrSucceed, configure: func(cfg *config.Config) { cfg.Pipelines.Strict = true }})
	s := consoleSession{t, strict}
	s.typeLines("/pipeline " + promtDOT)
	s.shows("Not started: this group runs only pipelines without warnings (pipelines.strict)", 1)
	s.shows(`unknown node attribute "promt"`, 1)
	page, err := strict.Runs().List(context.Background(), runs.Filter{})
	if err != nil || len(page.Runs) != 0 {
		t.Errorf("the strict group ran %d runs (%v); want none", len(page.Runs), err)
	}
}

// Issue 30, item 12: a pasted pipeline is listed by its digraph's name,
// not as "pipeline.dot".
func TestPastedPipelinesAreListedByTheirDigraphName(t *testing.T) {
	th := startTestHost(t, "", chatOrSucceed)
	c := consoleSession{t, th}
	c.typeLines("/pipeline " + promtDOT)
	c.shows("✓ Pipeline complete", 1)
	c.typeLines("/pipeline list")
	c.shows("Recent runs:", 1)
	c.shows("Typo.dot", 1)
	page, err := th.Runs().List(context.Background(), runs.Filter{})
	if err != nil || len(page.Runs) != 1 || page.Runs[0].FileName != "Typo.dot" {
		t.Errorf("runs = %+v, %v; want one recorded as Typo.dot", page.Runs, err)
	}
	if strings.Contains(th.screen.Text(), "pipeline.dot") {
		t.Errorf("the console names the pasted pipeline pipeline.dot:\n%s", th.screen.Text())
	}
}
