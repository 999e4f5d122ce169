// Package termstyle colours what nanohost prints for a person at a
// terminal, and only then: output that goes to a pipe or a file, or any
// output when NO_COLOR is set (https://no-color.org) or TERM is "dumb",
// stays plain text, byte for byte what scripts and tests read.
//
// It is a few ANSI SGR codes behind one switch. A library (fatih/color,
// lipgloss) would bring the same codes plus Windows console handling and
// layout nanohost does not need; the terminal test is golang.org/x/term's.
package termstyle

import (
	"io"
	"os"

	"golang.org/x/term"
)

// Style decorates text when it is on; the zero Style is off (plain).
type Style struct{ on bool }

// For is the style for output written to w: on when w is a terminal and
// the environment does not ask for plain output.
func For(w io.Writer) Style {
	f, ok := w.(interface{ Fd() uintptr })
	if !ok || !Wanted(os.Getenv) {
		return Style{}
	}
	return Style{on: term.IsTerminal(int(f.Fd()))}
}

// Wanted reports whether the environment (getenv) allows colour: NO_COLOR
// unset or empty, and TERM not "dumb".
func Wanted(getenv func(string) string) bool {
	return getenv("NO_COLOR") == "" && getenv("TERM") != "dumb"
}

// On is a style that always decorates (tests, and callers that decided).
func On() Style { return Style{on: true} }

// Enabled reports whether the style decorates: callers also use it to
// choose terminal-only output (symbols, a progress line).
func (s Style) Enabled() bool { return s.on }

func (s Style) paint(code, text string) string {
	if !s.on || text == "" {
		return text
	}
	return "\x1b[" + code + "m" + text + "\x1b[0m"
}

// Bold, Dim and the colours paint t (and return it unchanged when off).
func (s Style) Bold(t string) string   { return s.paint("1", t) }
func (s Style) Dim(t string) string    { return s.paint("2", t) }
func (s Style) Red(t string) string    { return s.paint("31", t) }
func (s Style) Green(t string) string  { return s.paint("32", t) }
func (s Style) Yellow(t string) string { return s.paint("33", t) }
func (s Style) Blue(t string) string   { return s.paint("34", t) }
func (s Style) Cyan(t string) string   { return s.paint("36", t) }

// Default is t in the terminal's default colour: no visible change, but
// the same number of bytes as the colours above, so a table cell painted
// with it lines up (text/tabwriter counts the codes) with coloured ones.
func (s Style) Default(t string) string { return s.paint("39", t) }

// Symbol is sym followed by a space when the style is on, "" when off:
// the marks a terminal shows before a verdict ("✗ ", "✓ ").
func (s Style) Symbol(sym string) string {
	if !s.on {
		return ""
	}
	return sym + " "
}

// Width is the width of the terminal w writes to, in columns; 0 when w is
// not a terminal or its size is unknown.
func Width(w io.Writer) int {
	f, ok := w.(interface{ Fd() uintptr })
	if !ok {
		return 0
	}
	cols, _, err := term.GetSize(int(f.Fd()))
	if err != nil {
		return 0
	}
	return cols
}

// Fit cuts text to at most cols runes (cols <= 0: no limit), ending a cut
// with "…": a line redrawn in place must not wrap.
func Fit(text string, cols int) string {
	if cols <= 0 {
		return text
	}
	r := []rune(text)
	if len(r) <= cols {
		return text
	}
	return string(r[:cols-1]) + "…"
}
