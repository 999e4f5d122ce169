package pipeline

import "strings"

// IsIdentifier reports whether s is a spec Identifier, [A-Za-z_][A-Za-z0-9_]*:
// what node ids, graph names and the parts of qualified keys must be.
func IsIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		letter := c == '_' || (c|0x20 >= 'a' && c|0x20 <= 'z')
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// IsQualifiedID reports whether s is Identifier ('.' Identifier)*, the form
// of attribute keys (human.default_choice) and context paths.
func IsQualifiedID(s string) bool {
	for part := range strings.SplitSeq(s, ".") {
		if !IsIdentifier(part) {
			return false
		}
	}
	return true
}
