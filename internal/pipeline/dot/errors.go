package dot

import (
	"fmt"

	"nanohost/internal/pipeline"
)

// SyntaxError is the only error type Parse returns. It points at the
// original source (not at the normalised text gographviz saw) and, when the
// input uses a DOT feature Attractor does not support, names that construct
// so tools can group failures and authors know what to change.
type SyntaxError struct {
	File string
	Pos  pipeline.Pos
	Msg  string
	// Construct names the unsupported or malformed construct, e.g.
	// "undirected edge --", "strict", "HTML label", "quoted node id";
	// "" for a plain grammar error.
	Construct string
	// Fix tells the author what to write instead.
	Fix string
}

func (e *SyntaxError) fileName() string {
	if e.File == "" {
		return "<input>"
	}
	return e.File
}

// Error renders "FILE:line:col: message (fix: ...)".
func (e *SyntaxError) Error() string {
	s := e.fileName()
	if e.Pos.IsValid() {
		s += fmt.Sprintf(":%d:%d", e.Pos.Line, e.Pos.Column)
	}
	s += ": " + e.Msg
	if e.Fix != "" {
		s += " (fix: " + e.Fix + ")"
	}
	return s
}

// Diagnostic converts the error into the front end's diagnostic form
// (rule "syntax", severity error).
func (e *SyntaxError) Diagnostic() pipeline.Diagnostic {
	d := pipeline.Diagnostic{
		Rule:     "syntax",
		Severity: pipeline.SeverityError,
		Message:  e.Msg,
		Fix:      e.Fix,
	}
	if d.Fix == "" {
		d.Fix = "correct the DOT syntax at this position (see the Attractor grammar, spec §2.2)"
	}
	return d.At(e.File, e.Pos)
}
