//go:build linux

package host

import (
	"bufio"
	"context"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/ptytest"
	"nanohost/internal/runs"
	"nanohost/internal/testkit"
)

// shipDOT is a pipeline typed on one line at the console.
const shipDOT = `digraph Ship { graph [goal="Ship the RSI change"]; ` +
	`start [shape=Mdiamond]; build [label="Build", prompt="build $goal"]; review [shape=hexagon, label="Ship it?"]; ` +
	`ship [label="Ship", prompt="ship"]; fix [label="Fix", prompt="fix"]; done [shape=Msquare]; ` +
	`start -> build -> review; review -> ship [label="[Y] Yes"]; review -> fix [label="[N] No"]; ship -> done; fix -> done }`

// TestConsoleRunsAPipelineWithAGateInATerminal is the console as a person
// uses it: the real host on a terminal (console.New over the terminal, as
// serve passes os.Stdin and os.Stdout), a pipeline typed with /pipeline,
// run by the runs service and the real engine, its thread printed as it
// goes, its gate answered with a key.
func TestConsoleRunsAPipelineWithAGateInATerminal(t *testing.T) {
	master, slave := ptytest.Open(t)
	th := launch(t, hostSetup{answer: func(context.Context, engine.Request) (engine.Result, error) {
		return engine.Result{Text: "Done. [outcome:success]"}, nil
	}, terminal: slave})

	screen := make(chan string, 1000)
	go func() {
		sc := bufio.NewScanner(master)
		for sc.Scan() {
			screen <- strings.TrimRight(sc.Text(), "\r")
		}
	}()
	// waitFor waits until the terminal has shown want (at any point so far:
	// a gate's settled prompt is printed asynchronously, so it may come
	// after the next stage starts).
	var transcript []string
	waitFor := func(want string) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			for _, line := range transcript {
				if strings.Contains(line, want) {
					return
				}
			}
			select {
			case line := <-screen:
				transcript = append(transcript, line)
			case <-deadline:
				t.Fatalf("the terminal never showed %q; it showed:\n%s", want, strings.Join(transcript, "\n"))
			}
		}
	}
	typeLine := func(s string) {
		t.Helper()
		if _, err := master.WriteString(s + "\n"); err != nil {
			t.Fatal(err)
		}
	}

	typeLine("/pipeline " + shipDOT)
	waitFor("[Pipeline] Ship · ")
	waitFor("— ▶ running")
	waitFor("→ Build (1/5)")
	waitFor("✓ Build")
	waitFor("❓ Ship it?")
	waitFor("[Y] Yes   [N] No")
	typeLine("y")
	waitFor("✓ you chose [Y] Yes")
	waitFor("→ Ship (")
	waitFor("✓ Pipeline complete")
	waitFor("✓ succeeded")
	// The run's thread is printed in the order it happened.
	thread := strings.Join(transcript, "\n")
	at := 0
	for _, want := range []string{"→ Build (1/5)", "✓ Build", "❓ Ship it?", "[Y] Yes   [N] No", "→ Ship (", "✓ Pipeline complete"} {
		i := strings.Index(thread[at:], want)
		if i < 0 {
			t.Fatalf("%q is missing or out of order in:\n%s", want, thread)
		}
		at += i + len(want)
	}
	if strings.Contains(thread, "→ Fix") {
		t.Errorf("answering Y must not lead to Fix:\n%s", thread)
	}

	testkit.WaitUntil(t, 10*time.Second, "the typed pipeline's run is recorded as succeeded", func() bool {
		page, err := th.Runs().List(context.Background(), runs.Filter{})
		return err == nil && len(page.Runs) == 1 && page.Runs[0].Status == runs.Succeeded
	})
}

// A gate answered on the dashboard first: a key typed at the console
// afterwards does not change the answer — refused and told who answered
// first if the prompt was still showing, or the prompt already says who
// chose what. The same runs.Answer call decided both.
func TestConsoleIsToldWhoAnsweredFirst(t *testing.T) {
	th := startTestHost(t, "", succeed)
	th.writeRequest(t, "tasks", "gate-1", map[string]any{"type": "start_pipeline", "dot": review(""), "chat": "console"})
	runID, _ := th.response(t, "gate-1")["run_id"].(string)
	testkit.WaitUntil(t, 10*time.Second, "the prompt is at the console", func() bool {
		return strings.Contains(th.screen.Text(), "❓ Ship the RSI change?")
	})
	st, err := th.Runs().Status(context.Background(), runID)
	if err != nil || len(st.Gates) != 1 {
		t.Fatalf("status %+v %v", st, err)
	}
	g := st.Gates[0]
	if _, err := th.WebRuns().Answer(context.Background(), runs.GateAnswer{RunID: runID, GateID: g.GateID, Option: 2},
		runs.Principal{Endpoint: "web", User: "web:ops"}); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(th.typing, "A\n"); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, 10*time.Second, "the console is told who answered first", func() bool {
		screen := th.screen.Text()
		return strings.Contains(screen, "Already answered by web:ops: [R] Reject") || strings.Contains(screen, "✓ web:ops chose [R] Reject")
	})
	testkit.WaitUntil(t, 10*time.Second, "the run takes the dashboard's answer", func() bool {
		r, err := th.store.GetRun(context.Background(), runID)
		return err == nil && r.Status == runs.Succeeded
	})
	if got := th.agents.prompts("fix"); len(got) != 1 || len(th.agents.prompts("ship")) != 0 {
		t.Errorf("the run went to ship %d times, fix %d; want the dashboard's Reject", len(th.agents.prompts("ship")), len(got))
	}
}

// ptyScreen is what a terminal shows, read line by line.
type ptyScreen struct {
	t          *testing.T
	master     *os.File
	lines      chan string
	transcript []string
}

func newPtyScreen(t *testing.T, master *os.File) *ptyScreen {
	s := &ptyScreen{t: t, master: master, lines: make(chan string, 1000)}
	go func() {
		sc := bufio.NewScanner(master)
		for sc.Scan() {
			s.lines <- strings.TrimRight(sc.Text(), "\r")
		}
	}()
	return s
}

// waitLine waits until a line shown so far satisfies ok, and returns it.
func (s *ptyScreen) waitLine(what string, ok func(string) bool) string {
	s.t.Helper()
	deadline := time.After(10 * time.Second)
	for i := 0; ; {
		for ; i < len(s.transcript); i++ {
			if ok(s.transcript[i]) {
				return s.transcript[i]
			}
		}
		select {
		case line := <-s.lines:
			s.transcript = append(s.transcript, line)
		case <-deadline:
			s.t.Fatalf("the terminal never showed %s; it showed:\n%s", what, strings.Join(s.transcript, "\n"))
		}
	}
}

func (s *ptyScreen) waitFor(want string) string {
	s.t.Helper()
	return s.waitLine(strconv.Quote(want), func(l string) bool { return strings.Contains(l, want) })
}

// settle reads what the terminal shows until it is quiet for a moment.
func (s *ptyScreen) settle() {
	for {
		select {
		case line := <-s.lines:
			s.transcript = append(s.transcript, line)
		case <-time.After(300 * time.Millisecond):
			return
		}
	}
}

func (s *ptyScreen) text() string { return strings.Join(s.transcript, "\n") }

func (s *ptyScreen) typeLine(line string) {
	s.t.Helper()
	if _, err := s.master.WriteString(line + "\n"); err != nil {
		s.t.Fatal(err)
	}
}

// Two pipelines whose gates share the key R (and each has one the other
// lacks: A, G).
const (
	alphaDOT = `digraph Alpha { graph [goal="Ship the alpha release"]; start [shape=Mdiamond]; ` +
		`review [shape=hexagon, label="Ship alpha?"]; ship [prompt="ship"]; rework [prompt="rework"]; done [shape=Msquare]; ` +
		`start -> review; review -> ship [label="[A] Approve"]; review -> rework [label="[R] Rework"]; ship -> done; rework -> done }`
	betaDOT = `digraph Beta { graph [goal="Fix the beta outage"]; start [shape=Mdiamond]; ` +
		`check [shape=hexagon, label="Outage fixed?"]; retry [prompt="retry"]; go [prompt="go"]; done [shape=Msquare]; ` +
		`start -> check; check -> retry [label="[R] Retry"]; check -> go [label="[G] Go"]; retry -> done; go -> done }`
)

// TestConsoleFirstHourOnARealTerminal is issue 30's items 5–7 at the
// console, on a real terminal, across a restart:
//   - /help, /status, /runs, /cancel and any other /word are answered by
//     the host — never sent to the agent — and a mistyped /pipeline keeps
//     its did-you-mean (item 5);
//   - after a restart, each resumed run's lines carry its short id, as a new
//     run's do (item 6);
//   - with runs waiting on [A]/[R] and [R]/[G], typing G answers the only
//     run that has a G, and R lists only the runs that have an R, each with
//     its pipeline and goal, never suggesting an answer a run lacks (item 7).
func TestConsoleFirstHourOnARealTerminal(t *testing.T) {
	dir := t.TempDir()
	master, slave := ptytest.Open(t)
	th := launch(t, hostSetup{dir: dir, answer: chatOrSucceed, terminal: slave})
	s := newPtyScreen(t, master)

	s.typeLine("/help")
	s.waitFor("/pipeline status [run]")
	s.typeLine("/status")
	s.waitFor("/status is not a command — did you mean /pipeline status?")
	s.typeLine("/runs")
	s.waitFor("/runs is not a command — did you mean /pipeline list?")
	s.typeLine("/cancel 3f9")
	s.waitFor("did you mean /pipeline cancel 3f9?")
	s.typeLine("/deploy now")
	s.waitFor("/deploy is not a command")
	s.typeLine("/pipelin list")
	s.waitFor("/pipelin is not a command — did you mean /pipeline list?")
	s.typeLine("hello")
	s.waitFor("agent heard: console: hello")
	if got := th.agents.prompts("chat"); len(got) != 1 {
		t.Errorf("the agent got %q; only the plain message is for it", got)
	}

	s.typeLine("/pipeline " + alphaDOT)
	s.waitFor("❓ Ship alpha?")
	s.typeLine("/pipeline " + betaDOT)
	s.waitFor("❓ Outage fixed?")
	pair := consoleSession{t, th}.waiting(2)
	ids := map[string]string{} // pipeline → short id
	for _, r := range pair {
		name, _ := th.describeRun(context.Background(), r.ID)
		ids[name] = runs.ShortID(r.ID)
	}
	alpha, beta := ids["Alpha"], ids["Beta"]
	if alpha == "" || beta == "" {
		t.Fatalf("runs by pipeline: %v", ids)
	}
	th.stop()

	// The host starts again on a new terminal: both runs resume and ask again.
	master, slave = ptytest.Open(t)
	th = launch(t, hostSetup{dir: dir, answer: chatOrSucceed, terminal: slave})
	s = newPtyScreen(t, master)
	for id, question := range map[string]string{alpha: "❓ Ship alpha?", beta: "❓ Outage fixed?"} {
		line := s.waitFor(question)
		if !strings.HasPrefix(strings.TrimSpace(line), id+" ") {
			t.Errorf("the resumed run's prompt %q does not carry its short id %s", line, id)
		}
	}
	// Each gate was asked once before the restart and once after: its
	// stage's resumed start is not counted as another visit.
	s.settle()
	if strings.Contains(s.text(), "visit 2") {
		t.Errorf("a gate asked again after a restart counts as a second visit:\n%s", s.text())
	}

	s.typeLine("R")
	which := s.waitFor(`2 runs are waiting for an answer — which one is "R" for?`)
	_ = which
	s.waitFor("Alpha: Ship the alpha release")
	s.waitFor("Beta: Fix the beta outage")
	s.waitFor("/pipeline answer " + alpha + " R")
	s.waitFor("/pipeline answer " + beta + " R")

	s.typeLine("G")
	s.waitLine("beta's end with its short id", func(l string) bool {
		return strings.HasPrefix(strings.TrimSpace(l), beta+" ") && strings.Contains(l, "Pipeline complete")
	})
	s.typeLine("A")
	s.waitLine("alpha's end with its short id", func(l string) bool {
		return strings.HasPrefix(strings.TrimSpace(l), alpha+" ") && strings.Contains(l, "Pipeline complete")
	})
	s.settle()
	if strings.Contains(s.text(), "/pipeline answer "+alpha+" G") || strings.Contains(s.text(), "/pipeline answer "+beta+" A") {
		t.Errorf("the console suggested an answer a run does not have:\n%s", s.text())
	}
	if strings.Contains(s.text(), "which one is \"G\"") || strings.Contains(s.text(), "which one is \"A\"") {
		t.Errorf("a key only one run offers was asked about instead of answered:\n%s", s.text())
	}
	if len(th.agents.prompts("go")) != 1 || len(th.agents.prompts("ship")) != 1 || len(th.agents.prompts("retry")) != 0 {
		t.Errorf("stages run: go %d, ship %d, retry %d; want G for Beta and A for Alpha",
			len(th.agents.prompts("go")), len(th.agents.prompts("ship")), len(th.agents.prompts("retry")))
	}
	// Every line of a run's thread (indented) carries its run's short id.
	for _, l := range s.transcript {
		if strings.HasPrefix(l, "  ") && strings.TrimSpace(l) != "" && !strings.HasPrefix(l, "   ") &&
			!strings.HasPrefix(strings.TrimSpace(l), alpha+" ") && !strings.HasPrefix(strings.TrimSpace(l), beta+" ") &&
			!strings.Contains(l, "/pipeline answer") {
			t.Errorf("a thread line without its run's short id: %q", l)
		}
	}
}
