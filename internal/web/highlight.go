package web

import (
	"strings"

	"github.com/alecthomas/chroma/v2"
	"github.com/alecthomas/chroma/v2/lexers"
)

// Syntax highlighting of diffs, on the server with chroma (the pure-Go
// highlighter Hugo and glamour use). It returns tokens, not HTML: the
// dashboard puts every token into the page with textContent, as it does
// all agent text, so a hostile file can never become markup.

// maxHighlight bounds the source one response highlights (chroma's regexp
// lexers take ~0.1 ms per line); the rest is shown plain.
const maxHighlight = 96 << 10

// token is a piece of a line and its class ("" for plain text): k keyword,
// s string, n name, nf function, nb builtin, nc class or type, c comment,
// m number, o operator, p punctuation, l other literal, g generic.
type token [2]string

// highlighter spends one response's budget.
type highlighter struct{ budget int }

// hunk highlights a hunk's lines in place: the old side (context and
// deletions) and the new side (context and insertions) are tokenised as
// the two texts they are, so a string or comment spanning lines is right.
func (hl *highlighter) hunk(path string, lines []lineJSON) {
	lexer := lexers.Match(path)
	if lexer == nil {
		return
	}
	var oldText, newText strings.Builder
	for _, l := range lines {
		if l.Op != "+" {
			oldText.WriteString(l.Text + "\n")
		}
		if l.Op != "-" {
			newText.WriteString(l.Text + "\n")
		}
	}
	if oldText.Len()+newText.Len() > hl.budget {
		hl.budget = 0
		return
	}
	hl.budget -= oldText.Len() + newText.Len()
	oldToks := tokenLines(lexer, oldText.String())
	newToks := tokenLines(lexer, newText.String())
	oi, ni := 0, 0
	for i := range lines {
		switch lines[i].Op {
		case "-":
			lines[i].Tokens, oi = tokensAt(oldToks, oi), oi+1
		case "+":
			lines[i].Tokens, ni = tokensAt(newToks, ni), ni+1
		default:
			lines[i].Tokens, oi, ni = tokensAt(newToks, ni), oi+1, ni+1
		}
	}
}

func tokensAt(lines [][]token, i int) []token {
	if i < len(lines) {
		return lines[i]
	}
	return nil
}

// tokenLines tokenises text and splits the tokens at its line breaks.
func tokenLines(lexer chroma.Lexer, text string) [][]token {
	it, err := chroma.Coalesce(lexer).Tokenise(nil, text)
	if err != nil {
		return nil
	}
	var out [][]token
	var cur []token
	for tok := it(); tok != chroma.EOF; tok = it() {
		class := tokenClass(tok.Type)
		parts := strings.Split(tok.Value, "\n")
		for i, part := range parts {
			if i > 0 {
				out = append(out, cur)
				cur = nil
			}
			if part == "" {
				continue
			}
			if n := len(cur); n > 0 && cur[n-1][0] == class {
				cur[n-1][1] += part
			} else {
				cur = append(cur, token{class, part})
			}
		}
	}
	if cur != nil {
		out = append(out, cur)
	}
	return out
}

// tokenClass folds chroma's token types into the few classes the
// dashboard colours.
func tokenClass(t chroma.TokenType) string {
	switch {
	case t.InCategory(chroma.Keyword):
		return "k"
	case t == chroma.NameFunction || t == chroma.NameFunctionMagic:
		return "nf"
	case t == chroma.NameBuiltin || t == chroma.NameBuiltinPseudo:
		return "nb"
	case t == chroma.NameClass || t == chroma.NameNamespace || t == chroma.NameDecorator || t == chroma.NameTag:
		return "nc"
	case t.InCategory(chroma.Comment):
		return "c"
	case t.InSubCategory(chroma.LiteralString):
		return "s"
	case t.InSubCategory(chroma.LiteralNumber):
		return "m"
	case t.InCategory(chroma.Literal):
		return "l"
	case t.InCategory(chroma.Operator):
		return "o"
	case t.InCategory(chroma.Punctuation):
		return "p"
	case t.InCategory(chroma.Generic):
		return "g"
	}
	return ""
}

// lineJSON is one line of a hunk in the API.
type lineJSON struct {
	Op     string  `json:"op"` // " ", "+", "-"
	Old    int     `json:"old,omitempty"`
	New    int     `json:"new,omitempty"`
	Text   string  `json:"text"`
	NoEOL  bool    `json:"no_eol,omitempty"`
	Tokens []token `json:"tokens,omitempty"`
}

type hunkJSON struct {
	OldStart int        `json:"old_start"`
	OldLines int        `json:"old_lines"`
	NewStart int        `json:"new_start"`
	NewLines int        `json:"new_lines"`
	Section  string     `json:"section,omitempty"`
	Lines    []lineJSON `json:"lines"`
}

// hunksJSON turns a parsed diff section into the API's hunks.
func hunksJSON(fd FileDiff) []hunkJSON {
	out := make([]hunkJSON, 0, len(fd.Hunks))
	for _, h := range fd.Hunks {
		hj := hunkJSON{OldStart: h.OldStart, OldLines: h.OldLines, NewStart: h.NewStart, NewLines: h.NewLines,
			Section: h.Section, Lines: make([]lineJSON, len(h.Lines))}
		for i, l := range h.Lines {
			hj.Lines[i] = lineJSON{Op: string(l.Op), Old: l.Old, New: l.New, Text: strings.TrimSuffix(l.Text, "\r"), NoEOL: l.NoEOL}
		}
		out = append(out, hj)
	}
	return out
}
