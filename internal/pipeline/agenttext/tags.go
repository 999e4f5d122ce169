// Package agenttext reads what an agent reports back to the engine: the
// structured tags at the end of its response text ([outcome:success],
// [preferred_label:…], [next:…], [context:key=value]) and the status.json
// file of the spec's Appendix C.
//
// It is a leaf package (it must not import the engine, which imports it), so
// statuses are plain normalised strings here; engine.ParseStatus accepts them.
package agenttext

import (
	"strings"

	"nanohost/internal/pipeline"
)

// Tag names. Matching is case-insensitive and treats '-' like '_', so
// [Preferred-Label:x] is the same tag as [preferred_label:x].
const (
	tagOutcome        = "outcome"
	tagPreferredLabel = "preferred_label"
	tagNext           = "next"
	tagContext        = "context"
)

// Parsed is what Parse found in an agent response.
type Parsed struct {
	// Status is the normalised status of the last valid [outcome:…] tag:
	// success, fail, partial_success, retry, skipped or a custom outcome
	// word of the pipeline's own (needs_dod); "" when there is none.
	Status string
	// PreferredLabel is the value of the last non-empty [preferred_label:…] tag.
	PreferredLabel string
	// Next lists the [next:…] node ids in order of appearance, without duplicates.
	Next []string
	// Context holds the [context:key=value] pairs (a later key wins); nil when there are none.
	Context map[string]string
	// Clean is the text with every tag removed, for showing to humans.
	Clean string
	// Warnings describe tags that were removed but not understood (an
	// outcome that is not a word, a context tag without '='), or a custom
	// outcome that looks like a misspelt status, so the engine can tell the
	// pipeline author instead of silently ignoring them.
	Warnings []string
}

// tag is one recognised tag: its canonical name and its raw value.
type tag struct {
	name, value, raw string
}

// matchTag reports whether b (which starts with '[' and ends with ']', with
// balanced brackets in between and no newline) is a recognised tag. It looks
// at the name first, so a bracket that is not a tag costs a few bytes.
func matchTag(b []byte) (tag, bool) {
	i := 1
	for i < len(b) && isHSpace(b[i]) {
		i++
	}
	nameStart := i
	for i < len(b) && i-nameStart <= maxTagName && isNameByte(b[i]) {
		i++
	}
	name := canonicalName(b[nameStart:i])
	for i < len(b) && isHSpace(b[i]) {
		i++
	}
	if name == "" || i >= len(b) || b[i] != ':' {
		return tag{}, false
	}
	raw := string(b)
	return tag{name: name, value: strings.TrimSpace(raw[i+1 : len(raw)-1]), raw: raw}, true
}

const maxTagName = len(tagPreferredLabel)

func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '-'
}

// canonicalName returns the tag name b spells, or "".
func canonicalName(b []byte) string {
	if len(b) > maxTagName {
		return ""
	}
	canon := strings.ReplaceAll(strings.ToLower(string(b)), "-", "_")
	switch canon {
	case tagOutcome, tagPreferredLabel, tagNext, tagContext:
		return canon
	}
	return ""
}

// unquote strips one pair of matching quotes or backticks around v, which
// agents sometimes add: [preferred_label:"Approve"].
func unquote(v string) string {
	if len(v) >= 2 {
		first, last := v[0], v[len(v)-1]
		if first == last && (first == '"' || first == '\'' || first == '`') {
			return strings.TrimSpace(v[1 : len(v)-1])
		}
	}
	return v
}

// NormalizeStatus maps an outcome spelling to its canonical form
// (pipeline.NormalizeOutcome): case is ignored, '-' and ' ' count as '_',
// failure/failed mean fail and succeeded success; any other word is a
// custom outcome (needs_dod). It returns "" for anything that is not an
// outcome (a placeholder such as <success|fail>). It agrees with
// engine.ParseStatus and with edge conditions.
func NormalizeStatus(s string) string {
	norm, _ := pipeline.NormalizeOutcome(s)
	return norm
}
