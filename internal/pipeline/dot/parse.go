// Package dot parses Attractor pipelines written in the DOT subset of the
// Attractor spec (§2) into a pipeline.Graph.
//
// Parsing runs in three steps:
//
//  1. our lexer (lexer.go) reads the source, decodes every name and value
//     exactly as the author wrote it, and rejects the DOT features Attractor
//     leaves out (undirected edges, strict, HTML labels, ports, several
//     graphs) at the place they occur;
//  2. gographviz parses a normalised copy of the token stream in which every
//     name and value is a placeholder, so only its statement grammar is used;
//  3. the AST walk (build.go) maps placeholders back to tokens and builds the
//     graph with Graphviz scoping of node/edge defaults and subgraph classes.
//
// Every error is a *SyntaxError with a position in the original source.
package dot

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/awalterschulze/gographviz"

	"nanohost/internal/pipeline"
)

// Limits bound the work Parse does, so hostile or broken input cannot
// exhaust memory or time. A zero field means "use the DefaultLimits value".
type Limits struct {
	MaxBytes, MaxNodes, MaxEdges, MaxDepth int
	// MaxTokens bounds what the bytes may hold: a file of short names
	// ("a=1,b=1,…") under MaxBytes would otherwise cost tens of bytes of
	// memory per byte of input, and every later step would walk them all.
	MaxTokens int
}

// DefaultLimits are far above any real pipeline (the biggest in the corpus
// has a few hundred nodes) yet keep a parse well under a second.
// Real pipelines average about ten bytes per token, so a file at MaxBytes
// has some 420k (and MaxEdges, MaxNodes bound the rest); MaxTokens leaves
// room above that, but not for a file of nothing but short attributes.
var DefaultLimits = Limits{MaxBytes: 4 << 20, MaxNodes: 20000, MaxEdges: 100000, MaxDepth: 64, MaxTokens: 600_000}

func (l Limits) withDefaults() Limits {
	def := func(v, d int) int {
		if v <= 0 {
			return d
		}
		return v
	}
	return Limits{
		MaxBytes:  def(l.MaxBytes, DefaultLimits.MaxBytes),
		MaxNodes:  def(l.MaxNodes, DefaultLimits.MaxNodes),
		MaxEdges:  def(l.MaxEdges, DefaultLimits.MaxEdges),
		MaxDepth:  def(l.MaxDepth, DefaultLimits.MaxDepth),
		MaxTokens: def(l.MaxTokens, DefaultLimits.MaxTokens),
	}
}

// grammar is gographviz's parser; a variable so a test can make it panic.
var grammar = gographviz.Parse

// Parse reads one Attractor digraph. file is only used in error messages
// ("" → "<input>").
func Parse(file string, src []byte) (*pipeline.Graph, error) {
	return ParseWithLimits(file, src, DefaultLimits)
}

// ParseWithLimits is Parse with explicit resource limits.
func ParseWithLimits(file string, src []byte, lim Limits) (g *pipeline.Graph, err error) {
	defer func() {
		// gographviz panics on some internal states; no input may crash the host.
		if r := recover(); r != nil {
			g, err = nil, &SyntaxError{File: file, Pos: pipeline.Pos{Line: 1, Column: 1},
				Msg: fmt.Sprintf("internal parser error: %v", r), Construct: "internal error",
				Fix: "simplify the file around recent edits and report this input as a bug"}
		}
	}()
	lim = lim.withDefaults()
	if len(src) > lim.MaxBytes {
		return nil, &SyntaxError{File: file, Pos: pipeline.Pos{Line: 1, Column: 1},
			Msg:       fmt.Sprintf("input is %d bytes, more than the limit of %d", len(src), lim.MaxBytes),
			Construct: "input too large", Fix: "split the pipeline into smaller graphs"}
	}
	toks, err := lex(file, src, lim.MaxDepth, lim.MaxTokens)
	if err != nil {
		return nil, err
	}
	text, offsets, index, runs := normalise(toks)
	tree, err := grammar(text)
	if err != nil {
		return nil, grammarError(file, src, toks, offsets, index, err)
	}
	return build(file, toks, runs, tree, lim)
}

// normalise renders the tokens as gographviz input. It returns the text, the
// offset of each emitted token in it, and the token index each one came from.
// Along the way it drops separators gographviz rejects but Graphviz accepts
// (empty statements, a trailing comma in an attribute list) and commas
// between attributes, which gographviz does not need (less work for it).
//
// An attribute list of plain key=value pairs — nearly all of them — goes to
// gographviz as one placeholder attribute, [_A<index of '['>], which the AST
// walk expands again: gographviz allocates for every token it reads, and
// attribute lists are most of a pipeline's tokens. Any other list goes
// token by token, so gographviz reports what is wrong with it as before.
//
// A run of simple statements — a node, or an edge chain between nodes, each
// with at most one plain attribute list — goes to gographviz as one
// placeholder node statement, _S<index of its first token>, which the AST
// walk reads token by token (simpleRun): these statements are nearly all of
// a large pipeline, their grammar is checked here (simpleStmt), and each
// statement gographviz reads costs it a dozen allocations. runs maps each
// such placeholder's first token to the index just past its run.
func normalise(toks []token) (text []byte, offsets, index []int, runs map[int]int) {
	n := &normaliser{
		// Small to start: with runs of simple statements collapsed, a large
		// pipeline's text is little more than its subgraphs' outlines.
		text:    make([]byte, 0, 256),
		offsets: make([]int, 0, 64),
		index:   make([]int, 0, 64),
		runs:    map[int]int{},
	}
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if collapseStmts && i > 0 && stmtBoundary(toks[i-1]) {
			if end := simpleRun(toks, i); end > i {
				n.offsets = append(n.offsets, len(n.text))
				n.index = append(n.index, i)
				n.text = append(n.text, stmtRunMark...)
				n.text = strconv.AppendInt(n.text, int64(i), 10)
				n.text = append(n.text, ' ')
				n.last = "_"
				n.runs[i] = end
				i = end - 1
				continue
			}
		}
		if t.is("[") && collapseAttrLists {
			if end, ok := plainAttrList(toks, i); ok {
				n.lexeme(i, "[")
				n.offsets = append(n.offsets, len(n.text))
				n.index = append(n.index, i+1)
				n.text = append(n.text, attrListMark...)
				n.text = strconv.AppendInt(n.text, int64(i), 10)
				n.text = append(n.text, ' ')
				n.lexeme(end, "]")
				i = end
				continue
			}
		}
		switch {
		case t.kind == tEOF:
		case t.isName():
			n.placeholder(i, i)
		case t.text == ";" && (n.last == "" || n.last == ";" || n.last == "{"):
		case t.text == "," && n.redundantComma(toks, i):
		case t.text == "[" || t.text == "]":
			n.inAttrs = t.text == "["
			n.lexeme(i, t.text)
		case t.text == "{":
			// Name anonymous subgraphs after their '{' token, so the walk
			// knows where they are (gographviz would invent a random name).
			switch braceOwner(toks, i) {
			case "subgraph":
				n.placeholder(i, i)
			case "":
				n.lexeme(i, "subgraph")
				n.placeholder(i, i)
			}
			n.lexeme(i, "{")
		default:
			n.lexeme(i, t.text)
		}
	}
	return n.text, n.offsets, n.index, n.runs
}

// stmtRunMark starts the placeholder of a run of simple statements.
const stmtRunMark = "_S"

// collapseStmts turns the statement-run placeholders on; a test turns them
// off to check they change nothing but the cost.
var collapseStmts = true

// stmtBoundary reports whether a statement may start right after t: after
// '{', ';', '}' or the ']' that ends an attribute list. (A statement may
// start elsewhere too — after a bare name — but a run is only begun where
// it surely does.)
func stmtBoundary(t token) bool {
	return t.kind == tPunct && (t.text == "{" || t.text == ";" || t.text == "}" || t.text == "]")
}

// simpleRun returns the index just past the simple statements that start at
// toks[i] (i itself when none does).
func simpleRun(toks []token, i int) int {
	for {
		end, ok := simpleStmt(toks, i)
		if !ok {
			return i
		}
		i = end
	}
}

// simpleStmt matches one simple statement at toks[i]: name (-> name)*,
// then at most one plain attribute list, then an optional ';' — and only
// when what follows can start the next statement or end the list, so the
// statement is exactly what gographviz would have read there.
func simpleStmt(toks []token, i int) (end int, ok bool) {
	if !toks[i].isStmtName() || toks[i+1].is("=") {
		return 0, false
	}
	j := i + 1
	for toks[j].kind == tArrow {
		if !toks[j+1].isStmtName() {
			return 0, false
		}
		j += 2
	}
	if toks[j].is("[") {
		close, ok := plainAttrList(toks, j)
		if !ok {
			return 0, false
		}
		j = close + 1
	}
	if toks[j].is(";") {
		j++
	}
	next := toks[j]
	switch {
	case next.isStmtName(), next.kind == tKeyword, next.is("{"), next.is("}"):
		return j, true
	}
	return 0, false
}

// isStmtName reports whether t is a name that can stand for a node: a bare
// word or a quoted string (a bare value only ever follows '=').
func (t token) isStmtName() bool { return t.kind == tWord || t.kind == tString }

func (t token) isName() bool { return t.kind == tWord || t.kind == tValue || t.kind == tString }

// is reports whether t is the punctuation p.
func (t token) is(p string) bool { return t.kind == tPunct && t.text == p }

// attrListMark starts the placeholder of a whole attribute list.
const attrListMark = "_A"

// collapseAttrLists turns the attribute list placeholders on; a test turns
// them off to check they change nothing but the cost.
var collapseAttrLists = true

// plainAttrList reports whether toks[open] ('[') opens a list of key=value
// pairs with at most one ',' or ';' after each — what gographviz takes as it
// is — and returns the index of its ']'. Anything else (an empty list, a
// key without a value, a separator in the wrong place) is left to gographviz
// and the AST walk, so its error stays what it was.
func plainAttrList(toks []token, open int) (int, bool) {
	pair := func(j int) bool {
		return j+2 < len(toks) && toks[j].isName() && toks[j+1].is("=") && toks[j+2].isName()
	}
	j := open + 1
	for pair(j) {
		j += 3
		if toks[j].is(",") || toks[j].is(";") {
			j++
		}
		if toks[j].is("]") {
			return j, true
		}
	}
	return 0, false
}

type normaliser struct {
	text           []byte
	offsets, index []int
	runs           map[int]int
	last           string // the last lexeme emitted; "_" for a placeholder
	inAttrs        bool   // inside [ ... ]
}

func (n *normaliser) lexeme(tok int, s string) {
	n.offsets = append(n.offsets, len(n.text))
	n.index = append(n.index, tok)
	n.text = append(n.text, s...)
	n.text = append(n.text, ' ')
	n.last = s
}

// placeholder emits "_<ref>", the stand-in for token ref.
func (n *normaliser) placeholder(tok, ref int) {
	n.offsets = append(n.offsets, len(n.text))
	n.index = append(n.index, tok)
	n.text = append(n.text, '_')
	n.text = strconv.AppendInt(n.text, int64(ref), 10)
	n.text = append(n.text, ' ')
	n.last = "_"
}

// redundantComma reports whether the comma at toks[i] can go: a repeated or
// leading comma, one before ']', or one between a value and the next key.
func (n *normaliser) redundantComma(toks []token, i int) bool {
	next := toks[i+1] // the last token is always EOF
	switch {
	case n.last == "," || n.last == "[":
		return true
	case next.kind == tPunct && next.text == "]":
		return true
	}
	return n.inAttrs && n.last == "_" && next.isName()
}

// braceOwner says what opened the '{' at toks[i]: "graph" for the root
// (digraph [name] {), "named" for subgraph name {, "subgraph" for subgraph {,
// and "" for a bare { ... }.
func braceOwner(toks []token, i int) string {
	isKw := func(j int, kw string) bool { return j >= 0 && toks[j].kind == tKeyword && toks[j].text == kw }
	isName := func(j int) bool { return j >= 0 && (toks[j].kind == tWord || toks[j].kind == tString) }
	switch {
	case isKw(i-1, "digraph"), isName(i-1) && isKw(i-2, "digraph"):
		return "graph"
	case isKw(i-1, "subgraph"):
		return "subgraph"
	case isName(i-1) && isKw(i-2, "subgraph"):
		return "named"
	}
	return ""
}

// grammarError turns a gographviz parse error into a SyntaxError at the
// original position of the offending token.
func grammarError(file string, src []byte, toks []token, offsets, index []int, err error) *SyntaxError {
	ti := len(toks) - 1 // end of input unless the error names a token
	off, expected, ok := goccDetails(err)
	if ok {
		if i, found := slices.BinarySearch(offsets, off); found {
			ti = index[i]
		}
	}
	if be := bracketError(file, src, toks, ti); be != nil {
		return be
	}
	at, prev := toks[ti], token{}
	if ti > 0 {
		prev = toks[ti-1]
	}
	msg := "unexpected " + at.describe()
	if want := friendlyExpected(expected); want != "" {
		msg += "; expected " + want
	}
	fix := "check the statement against the Attractor grammar (spec §2.2)"
	switch {
	case at.kind == tArrow && prev.kind == tPunct && prev.text == "]":
		fix = "put the attribute list after the last node of the edge: a -> b [label=\"x\"]"
	case at.kind == tEOF:
		fix = "close every '{' with '}' and every '[' with ']'"
	case at.kind == tKeyword && at.text == "digraph":
		fix = "put each pipeline in its own file; subgraphs are written: subgraph name { ... }"
	case !ok:
		msg = "syntax error: " + err.Error()
	}
	return &SyntaxError{File: file, Pos: at.pos(), Msg: msg, Fix: fix}
}

// goccDetails reads the position and expectations out of gographviz's error,
// whose type lives in an internal package and so is reached by reflection.
func goccDetails(err error) (offset int, expected []string, ok bool) {
	v := reflect.ValueOf(err)
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return 0, nil, false
	}
	tok := v.FieldByName("ErrorToken")
	if !tok.IsValid() || tok.Kind() != reflect.Pointer || tok.IsNil() {
		return 0, nil, false
	}
	off := tok.Elem().FieldByName("Pos").FieldByName("Offset")
	if !off.IsValid() || !off.CanInt() {
		return 0, nil, false
	}
	if exp := v.FieldByName("ExpectedTokens"); exp.IsValid() && exp.Kind() == reflect.Slice {
		for i := range exp.Len() {
			if s := exp.Index(i); s.Kind() == reflect.String {
				expected = append(expected, s.String())
			}
		}
	}
	return int(off.Int()), expected, true
}

var expectedNames = map[string]string{
	"id": "a name or value", "graphx": "graph", "␚": "end of input", "$": "end of input",
	"--": "", ":": "", "strict": "", // unsupported: never suggest them
}

func friendlyExpected(expected []string) string {
	var out []string
	for _, e := range expected {
		name, known := expectedNames[e]
		if !known {
			name = "'" + e + "'"
			if keywords[e] {
				name = e
			}
		}
		if name != "" && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	if len(out) > 6 {
		out = append(out[:6], "…")
	}
	return strings.Join(out, ", ")
}
