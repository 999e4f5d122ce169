//go:build linux

package console_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"nanohost/internal/channels"
	"nanohost/internal/channels/console"
	"nanohost/internal/channels/gate"
	"nanohost/internal/channels/report"
	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/frontend"
	"nanohost/internal/pipeline/script"
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
// uses it: `nanohost serve` on a terminal (console.New over the terminal,
// as serve passes os.Stdin and os.Stdout), a pipeline typed with
// /pipeline, run by the real engine (scripted backend), its thread printed
// as it goes, its gate answered with a key.
func TestConsoleRunsAPipelineWithAGateInATerminal(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	master, slave := openPTY(t)
	con := console.New(slave, slave)
	log := slog.New(slog.DiscardHandler)
	desk := gate.NewDesk(gate.NewMemBook(), log)
	defer desk.Wait()
	results := make(chan *engine.RunResult, 1)

	// The host's part, in brief: commands start runs, keys answer gates.
	go func() {
		_ = con.Run(ctx, func(in channels.Inbound) {
			switch {
			case in.Kind == channels.KindGateAnswer:
				desk.HandleAnswer(ctx, con, in)
			case in.Kind == channels.KindCommand && in.Command.Kind == channels.CmdRunDOT:
				go func() { results <- runAtConsole(ctx, t, con, desk, *in.Command, in.User) }()
			default:
				t.Errorf("unexpected input at the console: %+v", in)
			}
		})
	}()

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

	select {
	case res := <-results:
		if res == nil || res.Status != "success" {
			t.Fatalf("run result = %+v, want success", res)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the run did not finish")
	}
}

// runAtConsole runs a typed pipeline as the host would: its thread and
// status card on the console, its gates asked there.
func runAtConsole(ctx context.Context, t *testing.T, con *console.Console, desk *gate.Desk, cmd channels.Command, user string) *engine.RunResult {
	g, diags, err := frontend.Prepare("console.dot", []byte(cmd.DOT), frontend.Options{})
	if err != nil || pipeline.HasErrors(diags) {
		t.Errorf("prepare the typed pipeline: %v %v", err, diags)
		return nil
	}
	backend, err := script.Parse([]byte(`{"default": "Done. [outcome:success]"}`))
	if err != nil {
		t.Error(err)
		return nil
	}
	rep := report.Start(ctx, report.Config{Channel: con, Chat: console.Chat, RunID: "run-pty", Pipeline: g.Name, Goal: g.Goal(), Verbosity: cmd.Verbosity})
	eng := engine.New(engine.Config{
		Backend:     backend,
		Interviewer: desk.Interviewer(gate.Target{Channel: con, Chat: console.Chat, Thread: rep, StartedBy: user}),
		Observers:   []engine.Observer{rep},
		LogsRoot:    t.TempDir(), RunID: "run-pty", NoBackoff: true, NoFsync: true,
		Logger: slog.New(slog.DiscardHandler),
	})
	res, err := eng.Run(ctx, g, []byte(cmd.DOT), "console.dot")
	if err != nil {
		t.Errorf("engine: %v", err)
	}
	closeCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := rep.Close(closeCtx); err != nil {
		t.Error(err)
	}
	return res
}
