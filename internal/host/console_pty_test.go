//go:build linux

package host

import (
	"bufio"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/ptytest"
	"nanohost/internal/runs"
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

	eventually(t, 10*time.Second, "the typed pipeline's run is recorded as succeeded", func() bool {
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
	eventually(t, 10*time.Second, "the prompt is at the console", func() bool {
		return strings.Contains(th.screen.String(), "❓ Ship the RSI change?")
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
	eventually(t, 10*time.Second, "the console is told who answered first", func() bool {
		screen := th.screen.String()
		return strings.Contains(screen, "Already answered by web:ops: [R] Reject") || strings.Contains(screen, "✓ web:ops chose [R] Reject")
	})
	eventually(t, 10*time.Second, "the run takes the dashboard's answer", func() bool {
		r, err := th.store.GetRun(context.Background(), runID)
		return err == nil && r.Status == runs.Succeeded
	})
	if got := th.agents.prompts("fix"); len(got) != 1 || len(th.agents.prompts("ship")) != 0 {
		t.Errorf("the run went to ship %d times, fix %d; want the dashboard's Reject", len(th.agents.prompts("ship")), len(got))
	}
}
