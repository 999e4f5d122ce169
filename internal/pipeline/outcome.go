package pipeline

import (
	"strings"

	"nanohost/internal/pipeline/lint/didyoumean"
)

// OutcomeStatuses are the five stage statuses of spec §5.2, in the order
// messages list them.
var OutcomeStatuses = []string{"success", "partial_success", "retry", "fail", "skipped"}

// outcomeAliases are other spellings of the statuses that agents and other
// Attractor dialects use (Fabro writes outcome=succeeded / outcome=failed).
var outcomeAliases = map[string]string{
	"failure":   "fail",
	"failed":    "fail",
	"succeeded": "success",
}

// MaxOutcomeLen bounds a custom outcome word: it is a routing key, not a message.
const MaxOutcomeLen = 64

// NormalizeOutcome maps an outcome spelling to the form conditions and the
// engine compare: trimmed, lower-case, '-' and ' ' read as '_'. The five
// statuses and their aliases map to the status; any other word
// ([a-z][a-z0-9_]*, at most MaxOutcomeLen bytes) is a custom outcome of the
// pipeline's own (spec §10.2 allows any literal: outcome=needs_dod) and is
// returned as it is. Anything else — empty, punctuation, a placeholder such
// as "<success|fail>" — is not an outcome: ok is false.
//
// Agent tags, status.json files, scripted responses and edge conditions all
// go through this one function, so a condition written outcome=Needs-DoD
// matches an agent's [outcome:needs_dod].
func NormalizeOutcome(s string) (outcome string, ok bool) {
	norm := strings.ToLower(strings.TrimSpace(s))
	norm = strings.NewReplacer("-", "_", " ", "_").Replace(norm)
	if IsCanonicalOutcome(norm) {
		return norm, true
	}
	if alias, isAlias := outcomeAliases[norm]; isAlias {
		return alias, true
	}
	if !isOutcomeWord(norm) {
		return "", false
	}
	return norm, true
}

// IsCanonicalOutcome reports whether s is one of the five statuses as
// written by NormalizeOutcome.
func IsCanonicalOutcome(s string) bool {
	switch s {
	case "success", "partial_success", "retry", "fail", "skipped":
		return true
	}
	return false
}

// isOutcomeWord: a lower-case letter, then letters, digits and underscores.
func isOutcomeWord(s string) bool {
	if s == "" || len(s) > MaxOutcomeLen || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// OutcomeTypo returns the status a custom outcome word is probably a
// misspelling of (succes → success), or "". It is stricter than a
// did-you-mean for attribute names: custom outcomes are real words chosen by
// the author (process, skip, done), and only a slip of one or two letters
// should be questioned.
func OutcomeTypo(word string) string {
	if IsCanonicalOutcome(word) {
		return ""
	}
	for _, status := range OutcomeStatuses {
		limit := 1
		if min(len(word), len(status)) > 5 {
			limit = 2
		}
		if didyoumean.Distance(word, status) <= limit {
			return status
		}
	}
	return ""
}
