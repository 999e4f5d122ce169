//go:build linux

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"nanohost/internal/ptytest"
	"nanohost/internal/runs"
	"nanohost/internal/store/storetest"
	"nanohost/internal/testkit"
)

// reviewOneLine is a pipeline with a gate, typed on one line.
const reviewOneLine = `digraph Review { graph [goal="Ship the greeting"]; start [shape=Mdiamond]; ` +
	`review [shape=hexagon, label="Ship it?"]; ship [prompt="ship it"]; fix [prompt="fix it"]; done [shape=Msquare]; ` +
	`start -> review; review -> ship [label="[A] Approve"]; review -> fix [label="[R] Reject"]; ship -> done; fix -> done }`

// pastedLines is a pipeline as a person pastes it: over several lines, a
// blank one among them, a brace inside a label.
var pastedLines = []string{
	"/pipeline digraph Pasted {",
	`  graph [goal="Say hello {politely}"]`,
	"",
	"  start [shape=Mdiamond]",
	`  greet [prompt="say hello"]`,
	"  done  [shape=Msquare]",
	"  start -> greet -> done",
	"}",
}

var cardID = regexp.MustCompile(`\[Pipeline\] Review · ([0-9a-f]{6}) `)

// A person at a real terminal runs `nanohost serve` (the binary, its
// console on a pseudo-terminal, agents in Docker): they start two runs and
// see both ids, chat with the agent while both gates wait (the message
// reaches the agent, its reply comes back), answer each run with
// /pipeline answer and its short id, then paste a pipeline over several
// lines and it runs.
func TestConsoleSessionOnARealTerminal(t *testing.T) {
	t.Parallel()
	requireDocker(t)
	bin := nanohostBinary(t)
	dir := t.TempDir()
	script := writeScript(t, dir, map[string]any{"default": "[outcome:success]", "nodes": map[string]any{
		"chat": []string{"Hello from the agent, while your runs wait"},
	}})
	conf := consoleServeConfig(t, dir, script)

	master, slave := ptytest.Open(t)
	cmd := exec.Command(bin, "serve", "--config", conf)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), "TERM=xterm-256color")
	if u, ok := storetest.PostgresFor(t, dir); ok {
		cmd.Env = append(cmd.Env, "NANOHOST_STORE_URL="+u)
	}
	logf, err := os.Create(filepath.Join(dir, "serve.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	term := newScreen(master)
	typeLine := func(s string) {
		t.Helper()
		if _, err := fmt.Fprintf(master, "%s\n", s); err != nil {
			t.Fatal(err)
		}
	}
	term.WaitFor(t, "nanohost is ready", 1, 30*time.Second)

	typeLine("/pipeline " + reviewOneLine)
	typeLine("/pipeline " + reviewOneLine)
	term.WaitFor(t, "❓ Ship it?", 2, 90*time.Second)
	ids := cardID.FindAllStringSubmatch(term.Text(), -1)
	if len(ids) < 2 || ids[0][1] == ids[1][1] {
		t.Fatalf("the console does not show two run ids:\n%s", term.Text())
	}
	first, second := ids[0][1], ids[1][1]
	for _, id := range []string{first, second} {
		term.WaitFor(t, "/runs/pipeline-", 2, time.Second) // each card's dashboard link
		term.WaitFor(t, id+" ❓ Ship it?", 1, time.Second)
		term.WaitFor(t, "/pipeline answer "+id+" A", 1, time.Second)
	}

	typeLine("hello agent, anything new?")
	term.WaitFor(t, "Hello from the agent, while your runs wait", 1, 60*time.Second)
	st := readStore(t, filepath.Join(dir, "data"))
	ctx := context.Background()
	page, err := st.ListRuns(ctx, runs.Filter{Statuses: []runs.State{runs.Waiting}})
	if err != nil || len(page.Runs) != 2 {
		t.Fatalf("while the agent answered, %d runs wait (%v); want both", len(page.Runs), err)
	}

	typeLine("/pipeline answer " + first + " A")
	term.WaitFor(t, "✓ Run "+first+": answered [A] Approve.", 1, 30*time.Second)
	typeLine("/pipeline answer " + second[:4] + " Reject")
	term.WaitFor(t, "✓ Run "+second+": answered [R] Reject.", 1, 30*time.Second)
	term.WaitFor(t, "✓ Pipeline complete", 2, 90*time.Second)

	for _, line := range pastedLines {
		typeLine(line)
	}
	term.WaitFor(t, "[Pipeline] Pasted · ", 1, 30*time.Second)
	term.WaitFor(t, "✓ Pipeline complete", 3, 90*time.Second)
	testkit.WaitUntil(t, 20*time.Second, "all three runs are recorded as succeeded", func() bool {
		page, err := st.ListRuns(ctx, runs.Filter{Statuses: []runs.State{runs.Succeeded}})
		return err == nil && len(page.Runs) == 3
	})
	for _, node := range []string{"ship", "fix", "greet"} {
		total := 0
		page, _ := st.ListRuns(ctx, runs.Filter{})
		for _, r := range page.Runs {
			total += countEvents(t, st, r.ID, "StageCompleted", node)
		}
		if total != 1 {
			t.Errorf("%s completed %d times over the three runs, want once (A → ship, R → fix, the paste → greet)", node, total)
		}
	}
	screen := term.Text()
	t.Logf("the terminal showed:\n%s", screen)
	if strings.Contains(screen, "type one of the keys above") || strings.Contains(screen, "(only you)") {
		t.Errorf("the console still swallows messages or speaks Slack:\n%s", screen)
	}

	_ = cmd.Process.Signal(syscall.SIGTERM)
	term.WaitFor(t, "nanohost stopped.", 1, 30*time.Second)
	if err := cmd.Wait(); err != nil {
		t.Errorf("nanohost serve after SIGTERM: %v, want exit 0", err)
	}
}
