// Package refs reads and expands the ${…} references of a stage's prompt,
// label and tool_command: ${context.key}, ${node.field}, ${input.key},
// ${graph.goal}, any context key, with ${key:-default} for a value that is
// missing or empty (docs/semantics.md, "References in prompts").
package refs

import (
	"fmt"
	"strings"

	"nanohost/internal/pipeline"
)

// Ref is one well-formed ${…} in a text.
type Ref struct {
	Key        string // the context key as written (context.branch, review.confidence)
	Default    string
	HasDefault bool
	Start, End int // text[Start:End] is the whole ${…}
}

// Malformed is a ${ that does not make a reference; it stays as written.
type Malformed struct {
	Text   string
	Offset int
	Why    string
}

// maxRef bounds one reference's text; a longer ${ is not one.
const maxRef = 512

// Scan finds the references of text in order, and the ${ that are not
// references.
func Scan(text string) ([]Ref, []Malformed) {
	var refs []Ref
	var bad []Malformed
	for i := 0; i < len(text); {
		j := strings.Index(text[i:], "${")
		if j < 0 {
			break
		}
		start := i + j
		end := strings.IndexByte(text[start:min(len(text), start+maxRef)], '}')
		if end < 0 {
			bad = append(bad, Malformed{Text: clip(text[start:]), Offset: start, Why: "no closing }"})
			i = start + 2
			continue
		}
		end += start + 1
		r, why := parse(text[start+2 : end-1])
		if why != "" {
			bad = append(bad, Malformed{Text: text[start:end], Offset: start, Why: why})
		} else {
			r.Start, r.End = start, end
			refs = append(refs, r)
		}
		i = end
	}
	return refs, bad
}

func parse(body string) (Ref, string) {
	key, def, hasDef := strings.Cut(body, ":-")
	key = strings.TrimSpace(key)
	if key == "" {
		return Ref{}, "no key: write ${context.key}"
	}
	if !pipeline.IsQualifiedID(key) {
		return Ref{}, fmt.Sprintf("%q is not a key: identifiers joined by dots, such as context.branch or review.confidence", key)
	}
	return Ref{Key: key, Default: def, HasDefault: hasDef}, ""
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// Lookup returns a reference's value as text, and whether it is set.
type Lookup func(key string) (string, bool)

// Quote turns a value into the text put in its place (ShellQuote for a
// tool_command); nil puts the value as it is.
type Quote func(string) string

// TooLargeError says the expanded text would pass the bound.
type TooLargeError struct{ Size, Limit int64 }

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("expanding its ${…} references would make it %s, over the %s limit", pipeline.FormatBytes(e.Size), pipeline.FormatBytes(e.Limit))
}

// Expand puts each reference's value (or its default when the value is
// missing or empty) in its place, quoted by quote, in one pass: a value is
// never expanded again. It returns the keys that had neither a value nor a
// default (they read as empty). The result may not pass limit bytes: the
// size is added up before anything is built, so a text that repeats a large
// value costs nothing before it is refused.
func Expand(text string, lookup Lookup, quote Quote, limit int64) (string, []string, error) {
	refs, _ := Scan(text)
	if len(refs) == 0 {
		return text, nil, nil
	}
	values := make([]string, len(refs))
	quoted := map[string]string{} // each distinct value is quoted once, however often it is used
	var missing []string
	size := int64(len(text))
	for i, r := range refs {
		v, ok := lookup(r.Key)
		switch {
		case ok && v != "":
		case r.HasDefault:
			v = r.Default
		default:
			v = ""
			missing = append(missing, r.Key)
		}
		if quote != nil {
			q, done := quoted[v]
			if !done {
				q = quote(v)
				quoted[v] = q
			}
			v = q
		}
		values[i] = v
		size += int64(len(v) - (r.End - r.Start))
	}
	if size > limit {
		return "", nil, &TooLargeError{Size: size, Limit: limit}
	}
	var b strings.Builder
	b.Grow(int(size))
	last := 0
	for i, r := range refs {
		b.WriteString(text[last:r.Start])
		b.WriteString(values[i])
		last = r.End
	}
	b.WriteString(text[last:])
	return b.String(), missing, nil
}

// ShellQuote makes s one word for sh, whatever it holds: single quotes
// around it, each ' written '\”.
func ShellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
