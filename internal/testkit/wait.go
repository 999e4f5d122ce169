package testkit

import (
	"testing"
	"time"
)

// WaitUntil waits until cond holds, for at most timeout, and fails the test
// naming what it waited for. It is for state a test cannot be told about
// (another process's files, a metric); where something can signal, wait
// on the signal instead. cond is polled every 5 ms at first, backing off
// to every 100 ms, so a quick condition is seen at once and a slow one
// costs little.
func WaitUntil(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	pause := 5 * time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting until %s", timeout, what)
		}
		time.Sleep(pause)
		pause = min(2*pause, 100*time.Millisecond)
	}
}
