package pipeline

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// RequiredInputs are the inputs a pipeline declares it needs, in the order
// written: graph [inputs="repo,ref"] (commas or spaces between).
func (g *Graph) RequiredInputs() []string {
	if g == nil {
		return nil
	}
	var out []string
	for _, f := range strings.FieldsFunc(g.Attrs["inputs"], func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// Input is one key=value of a sub-pipeline node's inputs="…"; Value is as
// written (its ${…} references are expanded when the stage starts).
type Input struct {
	Key, Value string
}

// Compiled on first use: a package-level regexp is compiled by every command at start, `--help` included.
var inputKeyRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]{0,63}$`) })

// ParseInputs reads a sub-pipeline node's inputs="key=${value},key2=text":
// pairs separated by commas (a comma inside ${…} belongs to the reference),
// each key a word (letters, digits, _ . -, starting with a letter or _),
// each at most once.
func ParseInputs(s string) ([]Input, error) {
	var out []Input
	for _, part := range splitTopLevel(s) {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		k = strings.TrimSpace(k)
		switch {
		case !ok:
			return nil, fmt.Errorf("%q has no =: write key=value", part)
		case !inputKeyRE().MatchString(k):
			return nil, fmt.Errorf("%q is not an input name (letters, digits, _ . -, starting with a letter)", k)
		case slices.ContainsFunc(out, func(in Input) bool { return in.Key == k }):
			return nil, fmt.Errorf("input %s is given twice", k)
		}
		out = append(out, Input{Key: k, Value: strings.TrimSpace(v)})
	}
	return out, nil
}

// splitTopLevel splits s at the commas outside ${…}.
func splitTopLevel(s string) []string {
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '$' && i+1 < len(s) && s[i+1] == '{':
			depth++
			i++
		case s[i] == '}' && depth > 0:
			depth--
		case s[i] == ',' && depth == 0:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}
