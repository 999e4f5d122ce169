package dot

import (
	"fmt"

	"nanohost/internal/pipeline"
)

// The grammar notices a missing ']' or '}' only where the next statement
// fails to fit — a line or more later, with a list of tokens it expected.
// When that is why the grammar failed, the error points at the place the
// bracket is missing and names the one it should close.

// openBracket names an opening bracket for people.
var openBracket = map[string]string{"[": "attribute list", "{": "block"}

// bracketError looks for the first attribute list or block left open
// before the token at which the grammar failed (index failedAt) and
// reports it; nil when brackets are not the problem.
func bracketError(file string, src []byte, toks []token, failedAt int) *SyntaxError {
	var stack []int // indices of open '[' and '{'
	for i, t := range toks[:failedAt+1] {
		top := -1
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		inList := top >= 0 && toks[top].is("[")
		switch {
		case t.kind == tEOF:
			if top >= 0 {
				return unclosed(file, src, toks, top, i)
			}
		case inList && (t.is("[") || t.is("{") || t.is("}") || t.kind == tArrow || t.kind == tKeyword):
			// None of these can be inside an attribute list: it ended
			// before them without its ']'.
			return unclosed(file, src, toks, top, i)
		case t.is("[") || t.is("{"):
			stack = append(stack, i)
		case t.is("]") && inList, t.is("}") && top >= 0:
			stack = stack[:len(stack)-1]
		}
	}
	return nil
}

// unclosed is the error for the bracket toks[open] that is still open at
// toks[at]: a list is missing its ']' right after its last key=value pair
// (what follows is the next statement); a block its '}' at the end.
func unclosed(file string, src []byte, toks []token, open, at int) *SyntaxError {
	o := toks[open]
	closer := map[string]string{"[": "]", "{": "}"}[o.text]
	what := openBracket[o.text]
	if o.is("{") && braceOwner(toks, open) == "graph" {
		what = "graph"
	}
	msg := fmt.Sprintf("missing '%s' to close the %s opened at %d:%d", closer, what, o.pos().Line, o.pos().Column)
	if o.is("{") {
		return &SyntaxError{File: file, Pos: toks[at].pos(), Msg: msg + "; found " + toks[at].describe() + " instead",
			Construct: "unclosed " + what, Fix: fmt.Sprintf("add '}' where the %s ends", what)}
	}
	pos, next := tokenEnd(src, o), toks[at]
	for j := at - 1; j > open; j-- {
		if toks[j-1].is("=") && toks[j].isName() {
			pos, next = tokenEnd(src, toks[j]), toks[j+1]
			break
		}
	}
	return &SyntaxError{File: file, Pos: pos, Msg: msg,
		Construct: "unclosed attribute list", Fix: "end the attribute list with ']' here, before " + next.describe()}
}

// tokenEnd is the position just after t in src, found by lexing t again
// from its start (tokens keep only where they begin).
func tokenEnd(src []byte, t token) pipeline.Pos {
	lx := &lexer{src: src, text: string(src), line: 1}
	if len(src) >= 3 && src[0] == 0xEF && src[1] == 0xBB && src[2] == 0xBF {
		lx.lineStart = 3
	}
	for lx.line < t.pos().Line && lx.off < len(src) {
		lx.advance()
	}
	lx.off = min(lx.lineStart+t.pos().Column-1, len(src))
	switch {
	case lx.off >= len(src):
	case t.kind == tString:
		if _, err := lx.quoted(); err != nil {
			return t.pos()
		}
	case t.kind == tPunct || t.kind == tArrow:
		lx.off += len(t.text)
	default:
		for lx.off < len(src) && !endsBareValue(src[lx.off:]) {
			lx.off++
		}
	}
	return lx.pos()
}
