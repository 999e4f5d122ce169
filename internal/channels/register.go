package channels

import (
	"regexp"
	"strings"
)

// RegisterCommand is the main group's admin command, typed in its chat:
// "/register <chat> <folder> [trigger]" makes chat a group of its own,
// working in folder, answering messages that name trigger (or all).
type RegisterCommand struct {
	// Chat is the chat as typed: "slack:C0123", or a bare id the channel
	// it was typed on may own.
	Chat    string
	Folder  string
	Trigger string // "" for none
}

var registerCommand = regexp.MustCompile(`^/register\s+(\S+)\s+(\S+)(?:\s+(\S+))?\s*$`)

// IsRegister reports whether text is meant as a /register command (it
// starts with it), whether or not it parses.
func IsRegister(text string) bool {
	return strings.HasPrefix(strings.TrimSpace(text), "/register")
}

// ParseRegister parses a /register command; ok is false when text is not
// of its shape (the usage, runlog.RegisterUsage, says what is).
func ParseRegister(text string) (cmd RegisterCommand, ok bool) {
	m := registerCommand.FindStringSubmatch(strings.TrimSpace(text))
	if m == nil {
		return RegisterCommand{}, false
	}
	return RegisterCommand{Chat: m[1], Folder: m[2], Trigger: m[3]}, true
}
