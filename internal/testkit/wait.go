package testkit

import (
	"testing"
	"time"
)

// WaitUntil waits until cond holds, for at most timeout, and fails the test
// naming what it waited for. It is for state a test cannot be told about
// (another process's files, a metric); where something can signal, wait
// on the signal instead.
func WaitUntil(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	if !Eventually(timeout, cond) {
		tb.Fatalf("timed out after %s waiting until %s", timeout, what)
	}
}

// Eventually reports whether cond came to hold within timeout, for a
// test that says more than WaitUntil when it did not. cond is polled
// every 5 ms at first, backing off to every 100 ms, so a quick condition
// is seen at once and a slow one costs little.
func Eventually(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	pause := 5 * time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pause)
		pause = min(2*pause, 100*time.Millisecond)
	}
	return true
}
