// Package testkit is what tests share about their surroundings: whether a
// dependency this machine may lack (Docker, PostgreSQL, a browser, a
// Kubernetes cluster, the Attractor corpus) must be there.
package testkit

import "os"

// TB is what Missing needs of a test (testing.TB has it).
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
}

// Required reports whether the environment variable env (NANOHOST_REQUIRE_…)
// makes a missing dependency a failure: CI sets it to 1; any value but ""
// and "0" counts.
func Required(env string) bool {
	v := os.Getenv(env)
	return v != "" && v != "0"
}

// Missing stops a test whose dependency this machine lacks: it fails when
// env requires the dependency (Required), and otherwise skips, loudly. msg
// says what is missing and how to get it.
func Missing(tb TB, env, msg string) {
	tb.Helper()
	if Required(env) {
		tb.Fatalf("%s (required: %s=%s)", msg, env, os.Getenv(env))
		return
	}
	tb.Skipf("%s", msg)
}
