package testkit

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

// Buffer is what a console, a logger or a child process writes while the
// test reads it: a bytes.Buffer whose writes and reads may come from
// different goroutines.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Contains reports whether s was written.
func (b *Buffer) Contains(s string) bool { return strings.Contains(b.String(), s) }

// WaitFor waits until s is written, for at most timeout, and fails the
// test showing what was written instead.
func (b *Buffer) WaitFor(tb testing.TB, s string, timeout time.Duration) {
	tb.Helper()
	if !Eventually(timeout, func() bool { return b.Contains(s) }) {
		tb.Fatalf("the output never showed %q in %s:\n%s", s, timeout, b.String())
	}
}
