package runs

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"nanohost/internal/pipeline"
)

// Inputs are a run's inputs: values given when it starts (chat's
// key=value words, start_pipeline's "inputs", a schedule's or a webhook's
// mapping, the dashboard's form). The engine puts each in the run's
// context as input.<key>; they are recorded with the run, so a run resumed
// or taken over by another replica has them too.
type Inputs map[string]string

// Limits on inputs: a key is a word (letters, digits, _ . -, starting
// with a letter or _), at most MaxInputs of them, each value at most
// MaxInputValue bytes of UTF-8.
const (
	MaxInputs     = 50
	MaxInputValue = 8 << 10
)

// Compiled on first use, not at every command's start.
var inputKey = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]{0,63}$`) })

// ValidInputKey reports whether key may name an input.
func ValidInputKey(key string) bool { return inputKey().MatchString(key) }

// InputError refuses inputs that break the limits above, or a run started
// without an input its pipeline requires.
type InputError struct {
	// Missing are the required inputs not given (sorted).
	Missing []string
	// Reason is why the inputs given are refused, when none is missing.
	Reason string
}

func (e *InputError) Error() string {
	if len(e.Missing) > 0 {
		return fmt.Sprintf("the pipeline needs the input%s %s: give %s", plural(len(e.Missing)),
			strings.Join(e.Missing, ", "), exampleInputs(e.Missing))
	}
	return "bad inputs: " + e.Reason
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func exampleInputs(keys []string) string {
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=…"
	}
	return strings.Join(parts, " ")
}

// Check refuses inputs with bad keys, too many of them or values too long.
func (in Inputs) Check() error {
	if len(in) > MaxInputs {
		return &InputError{Reason: fmt.Sprintf("%d inputs; at most %d are taken", len(in), MaxInputs)}
	}
	for _, k := range slices.Sorted(maps.Keys(in)) {
		v := in[k]
		switch {
		case !ValidInputKey(k):
			return &InputError{Reason: fmt.Sprintf("%q is not an input name (letters, digits, _ . -, starting with a letter)", k)}
		case len(v) > MaxInputValue:
			return &InputError{Reason: fmt.Sprintf("input %s is %d bytes; at most %d are taken", k, len(v), MaxInputValue)}
		case !utf8.ValidString(v) || strings.ContainsRune(v, 0):
			return &InputError{Reason: fmt.Sprintf("input %s is not text", k)}
		}
	}
	return nil
}

// Missing are the inputs g requires (graph [inputs="repo,ref"]) that in
// lacks or leaves empty, sorted.
func (in Inputs) Missing(g *pipeline.Graph) []string {
	var missing []string
	for _, k := range RequiredInputs(g) {
		if strings.TrimSpace(in[k]) == "" {
			missing = append(missing, k)
		}
	}
	slices.Sort(missing)
	return missing
}

// RequiredInputs are the inputs a pipeline declares it needs, in the
// order written: graph [inputs="repo,ref"] (commas or spaces between).
func RequiredInputs(g *pipeline.Graph) []string { return g.RequiredInputs() }

// KeyedRunID is the run id of the one run a key stands for — a scheduled
// fire ("fire:<task>@<due>"), a webhook delivery ("hook:<name>/<id>"):
// shaped like every run id (pipeline-<seconds>-<hex>), the same on every
// replica, so starting it twice (StartRequest.ID) starts it once.
func KeyedRunID(key string, at time.Time) string {
	sum := sha256.Sum256([]byte(key))
	return fmt.Sprintf("pipeline-%d-%s", at.Unix(), hex.EncodeToString(sum[:4]))
}
