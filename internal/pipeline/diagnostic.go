package pipeline

import (
	"fmt"
	"strings"
)

// Severity of a diagnostic (spec §7.1).
type Severity string

const (
	SeverityError   Severity = "error"
	SeverityWarning Severity = "warning"
	SeverityInfo    Severity = "info"
)

// EdgeRef names an edge by its endpoints.
type EdgeRef struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// Diagnostic is one problem found in a pipeline: by the parser (rule
// "syntax"), a transform, or a lint rule. Line and Column point into the
// source when known, so editors and agents can jump to the place.
type Diagnostic struct {
	Rule     string   `json:"rule"`
	Severity Severity `json:"severity"`
	Message  string   `json:"message"`
	NodeID   string   `json:"node_id"`
	Edge     *EdgeRef `json:"edge"`
	Fix      string   `json:"fix"`
	File     string   `json:"file,omitempty"`
	Line     int      `json:"line,omitempty"`
	Column   int      `json:"column,omitempty"`
}

// At sets the diagnostic's position and returns it.
func (d Diagnostic) At(file string, p Pos) Diagnostic {
	d.File, d.Line, d.Column = file, p.Line, p.Column
	return d
}

// String renders the diagnostic the way compilers do:
//
//	file:line:col: error [rule] node X: message (fix: ...)
//
// The "node X:" (or "edge A -> B:") subject is left out when the message
// already names it, as the built-in lint messages do, so it is never said twice.
func (d Diagnostic) String() string {
	var b strings.Builder
	file := d.File
	if file == "" {
		file = "<input>"
	}
	b.WriteString(file)
	if d.Line > 0 {
		fmt.Fprintf(&b, ":%d", d.Line)
		if d.Column > 0 {
			fmt.Fprintf(&b, ":%d", d.Column)
		}
	}
	fmt.Fprintf(&b, ": %s [%s] ", d.Severity, d.Rule)
	if subject := d.subject(); subject != "" && !strings.Contains(d.Message, subject) {
		b.WriteString(subject + ": ")
	}
	b.WriteString(d.Message)
	if d.Fix != "" {
		fmt.Fprintf(&b, " (fix: %s)", d.Fix)
	}
	return b.String()
}

// subject names what the diagnostic is about: "edge A -> B", "node X" or "".
func (d Diagnostic) subject() string {
	switch {
	case d.Edge != nil:
		return "edge " + d.Edge.From + " -> " + d.Edge.To
	case d.NodeID != "":
		return "node " + d.NodeID
	}
	return ""
}

// HasErrors reports whether any diagnostic has error severity.
func HasErrors(ds []Diagnostic) bool {
	for _, d := range ds {
		if d.Severity == SeverityError {
			return true
		}
	}
	return false
}
