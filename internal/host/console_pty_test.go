//go:build linux

package host

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runs"
)

// openPTY opens a pseudo-terminal: the master is the person's keyboard and
// screen, the slave is what `nanohost serve` gets as stdin and stdout.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlock pty: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("pty number: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open pty slave: %v", err)
	}
	t.Cleanup(func() { s.Close(); m.Close() })
	return m, s
}

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
	master, slave := openPTY(t)
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
	waitFor("[Pipeline] Ship — ▶ running")
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
