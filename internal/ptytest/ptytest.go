//go:build linux

// Package ptytest gives tests a real terminal: a pseudo-terminal whose
// slave end a program gets as its stdin/stdout (so it sees a terminal, as
// when a person runs it) and whose master end the test types into and
// reads the screen from.
package ptytest

import (
	"fmt"
	"os"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Open opens a pseudo-terminal; both ends are closed when the test ends.
// It skips the test where the system has no pseudo-terminals.
func Open(t testing.TB) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		t.Fatalf("unlock pty: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		m.Close()
		t.Fatalf("pty number: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Fatalf("open pty slave: %v", err)
	}
	// A wide terminal that does not echo what is typed: the screen shows
	// only what the program prints.
	if tio, err := unix.IoctlGetTermios(int(s.Fd()), unix.TCGETS); err == nil {
		tio.Lflag &^= unix.ECHO
		_ = unix.IoctlSetTermios(int(s.Fd()), unix.TCSETS, tio)
	}
	_ = unix.IoctlSetWinsize(int(s.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 50, Col: 200})
	t.Cleanup(func() { s.Close(); m.Close() })
	return m, s
}
