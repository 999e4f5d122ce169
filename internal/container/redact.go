package container

import (
	"encoding/json"
	"slices"
	"strings"
)

// minRedactedLen keeps short values (a "1", a "true") from shredding
// ordinary text; real credentials are far longer.
const minRedactedLen = 8

// redactor blanks the agent secrets out of everything that comes back from
// a container — answers, errors, status files, stderr, stray stdout — so an
// agent that prints its environment (or a CLI that echoes its key in an
// error) cannot leak a secret into the run's files, events or chat.
type redactor struct{ r *strings.Replacer }

func newRedactor(secrets map[string]string) redactor {
	type pair struct{ value, name string }
	var pairs []pair
	for name, v := range secrets {
		if len(v) < minRedactedLen {
			continue
		}
		pairs = append(pairs, pair{v, name})
		// As it appears inside a JSON string (a status file).
		if q, err := json.Marshal(v); err == nil && string(q[1:len(q)-1]) != v {
			pairs = append(pairs, pair{string(q[1 : len(q)-1]), name})
		}
	}
	if len(pairs) == 0 {
		return redactor{}
	}
	// Longest first, so a secret containing another is blanked whole.
	slices.SortFunc(pairs, func(a, b pair) int { return len(b.value) - len(a.value) })
	var oldnew []string
	for _, p := range pairs {
		oldnew = append(oldnew, p.value, "[secret "+p.name+" redacted]")
	}
	return redactor{strings.NewReplacer(oldnew...)}
}

func (r redactor) String(s string) string {
	if r.r == nil {
		return s
	}
	return r.r.Replace(s)
}

func (r redactor) Bytes(b []byte) []byte {
	if r.r == nil {
		return b
	}
	return []byte(r.r.Replace(string(b)))
}
