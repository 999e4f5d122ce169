package channels

import (
	"fmt"
	"strings"
)

// Verbosity is how much of a run is posted to its thread (host document,
// "Verbosity Levels"). The zero value means "not given": use the default.
type Verbosity string

const (
	// VerbosityMinimal posts the start, the end and errors (~3-5 messages).
	VerbosityMinimal Verbosity = "minimal"
	// VerbosityStandard adds every stage start/finish, routing decisions
	// on conditional edges and retries (~10-15 messages).
	VerbosityStandard Verbosity = "standard"
	// VerbosityVerbose adds agent response summaries, context updates and
	// checkpoint saves (~20-30 messages).
	VerbosityVerbose Verbosity = "verbose"
)

// DefaultVerbosity is used when a run does not say.
const DefaultVerbosity = VerbosityStandard

// ParseVerbosity reads a verbosity name case-insensitively; "" yields "".
func ParseVerbosity(s string) (Verbosity, error) {
	switch v := Verbosity(strings.ToLower(strings.TrimSpace(s))); v {
	case "", VerbosityMinimal, VerbosityStandard, VerbosityVerbose:
		return v, nil
	}
	return "", fmt.Errorf("unknown verbosity %q (want minimal, standard or verbose)", s)
}

// OrDefault returns v, or DefaultVerbosity when v is empty.
func (v Verbosity) OrDefault() Verbosity {
	if v == "" {
		return DefaultVerbosity
	}
	return v
}

// AtLeast reports whether v (defaulted) includes everything level shows.
func (v Verbosity) AtLeast(level Verbosity) bool {
	return verbosityRank(v.OrDefault()) >= verbosityRank(level)
}

func verbosityRank(v Verbosity) int {
	switch v {
	case VerbosityMinimal:
		return 0
	case VerbosityVerbose:
		return 2
	default:
		return 1
	}
}
