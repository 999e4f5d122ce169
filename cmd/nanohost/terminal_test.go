//go:build linux

package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"nanohost/internal/ptytest"
)

// runOnTerminal runs the binary the way a person at a terminal does: its
// stdin, stdout and stderr are a pseudo-terminal. env is added to the
// environment (NO_COLOR=1 …). It returns what the terminal showed.
func runOnTerminal(t *testing.T, env []string, args ...string) cliResult {
	t.Helper()
	master, slave := ptytest.Open(t)
	cmd := exec.Command(nanohostBin, args...)
	cmd.Env = append(withoutColorEnv(os.Environ()), env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close() // the child has its own; the master reads EOF (EIO) once it exits
	var screen bytes.Buffer
	copied := make(chan struct{})
	go func() { _, _ = io.Copy(&screen, master); close(copied) }()
	err := cmd.Wait()
	<-copied
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return cliResult{stdout: strings.ReplaceAll(screen.String(), "\r\n", "\n"), code: code}
}

// withoutColorEnv drops the variables that turn colour off, so a test
// decides them (the test runner's own terminal settings must not).
func withoutColorEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "NO_COLOR=") && !strings.HasPrefix(kv, "TERM=") {
			out = append(out, kv)
		}
	}
	return append(out, "TERM=xterm-256color")
}

const ansiEscape = "\x1b["

// validate on a terminal colours and marks severities and the verdict; the
// same command piped, or with NO_COLOR, prints the plain compiler-style
// lines tools parse, byte for byte.
func TestValidateIsColouredOnlyOnATerminal(t *testing.T) {
	path := writeDOT(t, "typo.dot", promtDOT)
	tty := runOnTerminal(t, nil, "pipeline", "validate", "--strict", path)
	if tty.code != 2 || !strings.Contains(tty.stdout, ansiEscape) ||
		!strings.Contains(tty.stdout, "\x1b[33m⚠ warning\x1b[0m [attr_unknown]") || !strings.Contains(tty.stdout, "\x1b[31m✗\x1b[0m ") {
		t.Errorf("on a terminal: exit %d, screen:\n%q", tty.code, tty.stdout)
	}
	noColor := runOnTerminal(t, []string{"NO_COLOR=1"}, "pipeline", "validate", "--strict", path)
	piped := runNanohost(t, "", "pipeline", "validate", "--strict", path)
	for name, r := range map[string]cliResult{"NO_COLOR": noColor, "piped": piped} {
		if strings.Contains(r.stdout, ansiEscape) || strings.Contains(r.stdout, "⚠") || strings.Contains(r.stdout, "✗") {
			t.Errorf("%s output has colour or marks:\n%q", name, r.stdout)
		}
	}
	if noColor.stdout != piped.stdout {
		t.Errorf("NO_COLOR on a terminal differs from piped output:\n%q\n%q", noColor.stdout, piped.stdout)
	}
}

// On a terminal the live log is coloured and a status line under it shows
// the long stage running, redrawn in place and erased before the next log
// line; with NO_COLOR the same terminal gets the plain log.
func TestPipelineRunLiveLogOnATerminal(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "slow.dot", slowDOT)
	writeFile(t, dir, "slow.json", slowScript)
	args := []string{"pipeline", "run", filepath.Join(dir, "slow.dot"), "--script", filepath.Join(dir, "slow.json"),
		"--no-backoff", "--logs", filepath.Join(dir, "logs-tty")}
	tty := runOnTerminal(t, nil, args...)
	if tty.code != 0 {
		t.Fatalf("exit %d\n%s", tty.code, tty.stdout)
	}
	for _, want := range []string{`\x1b\[32m  ✓ plan — `, `\x1b\[33m  ✗ build — the agent reported retry \(attempt 1/3\)`,
		`\x1b\[2m  . build \(2/3\) running \d+s · 1 of 3 stages done · \d+s in all\x1b\[0m\r\x1b\[K`,
		`\r\x1b\[K\x1b\[32m  ✓ build — \ds \(attempt 2\)`} {
		if !regexp.MustCompile(want).MatchString(tty.stdout) {
			t.Errorf("terminal lacks %s:\n%q", want, tty.stdout)
		}
	}
	args[len(args)-1] = filepath.Join(dir, "logs-nocolor")
	plain := runOnTerminal(t, []string{"NO_COLOR=1"}, args...)
	if plain.code != 0 || strings.Contains(plain.stdout, ansiEscape) || !regexp.MustCompile(`\n  ✓ build — \ds \(attempt 2\)\n`).MatchString(plain.stdout) {
		t.Errorf("NO_COLOR: exit %d\n%q", plain.code, plain.stdout)
	}
}

// runs list marks and colours each status on a terminal, keeping the
// columns aligned; piped it prints the bare state words.
func TestRunsListColoursStatesOnATerminal(t *testing.T) {
	dir, _ := hostDB(t)
	args := []string{"runs", "list", "--db", filepath.Join(dir, "data", "nanohost.db")}
	if env := storeEnv(dir); env != nil {
		args = args[:2] // the configuration's store: PostgreSQL (NANOHOST_TEST_STORE=postgres)
	}
	tty := runOnTerminal(t, storeEnv(dir), args...)
	if tty.code != 0 {
		t.Fatalf("exit %d\n%s", tty.code, tty.stdout)
	}
	lines := strings.Split(strings.TrimSpace(tty.stdout), "\n")
	if len(lines) != 4 {
		t.Fatalf("want a header and 3 runs:\n%q", tty.stdout)
	}
	for i, want := range []string{"\x1b[34m▶ running\x1b[0m", "\x1b[31m✗ failed\x1b[0m", "\x1b[32m✓ succeeded\x1b[0m"} {
		if !strings.Contains(lines[i+1], want) {
			t.Errorf("row %d %q lacks %q", i+1, lines[i+1], want)
		}
	}
	column := runeIndex(regexp.MustCompile("\x1b\\[[0-9]+m").ReplaceAllString(lines[0], ""), " GROUP") + 1
	for _, row := range lines[1:] {
		plain := regexp.MustCompile("\x1b\\[[0-9]+m").ReplaceAllString(row, "")
		if runeIndex(plain, " main ")+1 != column && runeIndex(plain, " ops ")+1 != column {
			t.Errorf("the GROUP column is not aligned (header at %d):\n%s", column, strings.Join(lines, "\n"))
		}
	}
}

func runeIndex(s, sub string) int {
	i := strings.Index(s, sub)
	if i < 0 {
		return -10
	}
	return len([]rune(s[:i]))
}
