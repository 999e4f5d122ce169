package runlog

import "testing"

// Issue 30, item 12: who started a run reads as a person would say it,
// never as the recorded id ("web:local", "task:nightly").
func TestStarterIsNamedInWords(t *testing.T) {
	for user, want := range map[string]string{
		"":             "",
		"web:local":    "local operator (dashboard)",
		"web:token":    "token holder (dashboard)",
		"web:ana":      "ana (dashboard)",
		"console":      "the console's operator",
		"agent:main":   "the agent of group main",
		"task:nightly": "schedule nightly",
		"hook:github":  "webhook github",
		"U0123ABCD":    "chat user U0123ABCD",
	} {
		if got := Starter(user); got != want {
			t.Errorf("Starter(%q) = %q; want %q", user, got, want)
		}
	}
}
