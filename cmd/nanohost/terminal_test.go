//go:build linux

package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
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
