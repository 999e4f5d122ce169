package agenttext

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// MaxStatusFileSize caps status.json: it is a small summary, and a larger
// file means an agent wrote something else there.
const MaxStatusFileSize = 1 << 20

// StatusFile is a status.json an agent or tool wrote (spec Appendix C).
type StatusFile struct {
	// Outcome is the normalised status (see NormalizeStatus).
	Outcome          string
	PreferredLabel   string
	SuggestedNextIDs []string
	ContextUpdates   map[string]any
	Notes            string
	FailureReason    string
}

// Both spellings of the two renamed fields are accepted: Appendix C writes
// "outcome" and "preferred_next_label", the Outcome model (and our own
// MarshalStatusFile extras) say "status" and "preferred_label".
var statusFileAliases = [][2]string{
	{"outcome", "status"},
	{"preferred_next_label", "preferred_label"},
}

// ParseStatusFile reads and validates a status.json. Unknown fields are
// ignored so that tools can add their own; the known ones must have the
// right type, and the outcome must be one of the five statuses or a custom
// outcome word (pipeline.NormalizeOutcome).
func ParseStatusFile(data []byte) (StatusFile, error) {
	var sf StatusFile
	if len(data) > MaxStatusFileSize {
		return sf, fmt.Errorf("status file is %d bytes; the limit is %d (1 MiB): keep it to the outcome and short notes", len(data), MaxStatusFileSize)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return sf, fmt.Errorf("status file: %w", describeJSONError(data, err))
	}
	if fields == nil {
		return sf, errors.New(`status file: want a JSON object such as {"outcome": "success"}, got null`)
	}
	for _, pair := range statusFileAliases {
		if err := mergeAlias(fields, pair[0], pair[1]); err != nil {
			return sf, err
		}
	}

	if _, ok := fields["outcome"]; !ok {
		return sf, errors.New(`status file has no "outcome": add "outcome": "success" (or fail, partial_success, retry, skipped)`)
	}
	var outcome string
	if err := decodeField(fields, "outcome", &outcome); err != nil {
		return sf, err
	}
	sf.Outcome = NormalizeStatus(outcome)
	if sf.Outcome == "" {
		return sf, fmt.Errorf(`status file: %q is not an outcome; use success, partial_success, retry, fail, skipped or a custom outcome word (letters, digits, _)`, outcome)
	}
	if err := decodeField(fields, "preferred_next_label", &sf.PreferredLabel); err != nil {
		return sf, err
	}
	if err := decodeNextIDs(fields, &sf.SuggestedNextIDs); err != nil {
		return sf, err
	}
	if err := decodeField(fields, "context_updates", &sf.ContextUpdates); err != nil {
		return sf, err
	}
	if err := decodeField(fields, "notes", &sf.Notes); err != nil {
		return sf, err
	}
	if err := decodeField(fields, "failure_reason", &sf.FailureReason); err != nil {
		return sf, err
	}
	return sf, nil
}

// mergeAlias moves the alias field onto the canonical name, refusing a file
// that gives both with different values.
func mergeAlias(fields map[string]json.RawMessage, canonical, alias string) error {
	a, hasAlias := fields[alias]
	if !hasAlias {
		return nil
	}
	delete(fields, alias)
	c, hasCanonical := fields[canonical]
	if hasCanonical && !bytes.Equal(bytes.TrimSpace(c), bytes.TrimSpace(a)) {
		return fmt.Errorf("status file has both %q and %q with different values: keep one", canonical, alias)
	}
	fields[canonical] = a
	return nil
}

// decodeField decodes fields[name] into dst (leaving dst alone when the
// field is absent or null) and names the field and expected type on error.
func decodeField(fields map[string]json.RawMessage, name string, dst any) error {
	raw, ok := fields[name]
	if !ok || string(bytes.TrimSpace(raw)) == "null" {
		return nil
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return fmt.Errorf("status file: %q must be %s, got %s", name, describeType(dst), jsonKind(raw))
	}
	return nil
}

// decodeNextIDs accepts a list of ids, or a single id as a plain string.
func decodeNextIDs(fields map[string]json.RawMessage, dst *[]string) error {
	var one string
	if raw, ok := fields["suggested_next_ids"]; ok && json.Unmarshal(raw, &one) == nil {
		if one = strings.TrimSpace(one); one != "" {
			*dst = []string{one}
		}
		return nil
	}
	return decodeField(fields, "suggested_next_ids", dst)
}

func describeType(dst any) string {
	switch dst.(type) {
	case *string:
		return "a string"
	case *[]string:
		return "a list of strings"
	case *map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", dst)
}

// jsonKind names the JSON type of raw for error messages.
func jsonKind(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "a list containing a non-string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// describeJSONError turns a decoding error into one that says where the
// problem is (line and column) rather than a byte offset.
func describeJSONError(data []byte, err error) error {
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		line, col := lineCol(data, syn.Offset-1) // Offset is just past the bad byte
		return fmt.Errorf("invalid JSON at line %d, column %d: %v", line, col, syn)
	}
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		line, col := lineCol(data, typ.Offset-1)
		return fmt.Errorf("line %d, column %d: want a JSON object such as {\"outcome\": \"success\"}, got %s", line, col, typ.Value)
	}
	return err
}

// lineCol converts the offset of a byte into its 1-based line and column.
func lineCol(data []byte, offset int64) (line, col int) {
	offset = min(max(offset, 0), int64(len(data)))
	before := data[:offset]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(offset) - bytes.LastIndexByte(before, '\n')
	return line, col
}
