package dot

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/awalterschulze/gographviz/ast"

	"nanohost/internal/pipeline"
)

// builder walks gographviz's AST and builds the pipeline graph.
type builder struct {
	file string
	toks []token
	lim  Limits
	g    *pipeline.Graph
	// member records, per node, the innermost subgraph of every statement
	// that mentioned it; classes and Subgraphs are derived at the end because
	// a subgraph's label may be set after its nodes.
	member map[*pipeline.Node][]*subgraph
	// runs are the runs of simple statements normalise handed gographviz
	// as one placeholder each: first token → just past the last.
	runs map[int]int
}

// subgraph is one `subgraph name { ... }` block (or anonymous `{ ... }`).
type subgraph struct {
	id        string // "" when anonymous
	pos       pipeline.Pos
	attrs     pipeline.Attrs
	parent    *subgraph
	collect   bool     // an edge endpoint: remember the nodes mentioned inside
	mentioned []string // nodes mentioned inside, in order, when collect
	seen      map[string]bool
	class     string // ClassFromLabel of its final label, made once for all its nodes
	classMade bool
}

// labelClass is the class the subgraph's label gives its nodes. It is asked
// once the whole file is built, when the label can no longer change.
func (sg *subgraph) labelClass() string {
	if !sg.classMade {
		sg.class, sg.classMade = ClassFromLabel(sg.attrs["label"]), true
	}
	return sg.class
}

// scope is the Graphviz attribute scope of a (sub)graph: defaults set inside
// apply to nodes and edges created later in it and its nested subgraphs.
type scope struct {
	sub          *subgraph // nil at the root
	nodeDefaults pipeline.Attrs
	edgeDefaults pipeline.Attrs
}

// endpoint is a node named in an edge statement.
type endpoint struct {
	id  string
	pos pipeline.Pos
}

func build(file string, toks []token, runs map[int]int, tree *ast.Graph, lim Limits) (*pipeline.Graph, error) {
	b := &builder{file: file, toks: toks, lim: lim, member: map[*pipeline.Node][]*subgraph{}, runs: runs}
	if tree.Type != ast.DIGRAPH || tree.Strict { // the lexer rejects both; keep the walk honest
		return nil, b.errAt(toks[0].pos(), "undirected graph", "declare the pipeline as: digraph Name {",
			"only non-strict digraphs are supported")
	}
	name := ""
	if t, ok := b.tok(tree.ID); ok {
		name = t.text
	}
	b.g = pipeline.New(name)
	b.g.File = file
	root := &scope{nodeDefaults: pipeline.Attrs{}, edgeDefaults: pipeline.Attrs{}}
	if err := b.stmts(root, tree.StmtList); err != nil {
		return nil, err
	}
	b.deriveClasses()
	b.g.Reindex() // edgeStmt appended the edges unindexed
	return b.g, nil
}

func (b *builder) errAt(p pipeline.Pos, construct, fix, format string, args ...any) *SyntaxError {
	return &SyntaxError{File: b.file, Pos: p, Msg: fmt.Sprintf(format, args...), Construct: construct, Fix: fix}
}

// tok maps a placeholder ID back to its token. IDs gographviz made up itself
// (anonymous subgraph names, "true" for a valueless attribute) are not ours.
func (b *builder) tok(id ast.ID) (token, bool) {
	s := string(id)
	if len(s) < 2 || s[0] != '_' {
		return token{}, false
	}
	i, err := strconv.Atoi(s[1:])
	if err != nil || i < 0 || i >= len(b.toks) {
		return token{}, false
	}
	return b.toks[i], true
}

func (b *builder) stmts(s *scope, list ast.StmtList) error {
	for _, st := range list {
		if err := b.stmt(s, st); err != nil {
			return err
		}
	}
	return nil
}

func (b *builder) stmt(s *scope, st ast.Stmt) error {
	switch st := st.(type) {
	case *ast.NodeStmt:
		return b.nodeStmt(s, st)
	case ast.NodeStmt:
		return b.nodeStmt(s, &st)
	case *ast.EdgeStmt:
		return b.edgeStmt(s, st)
	case ast.EdgeStmt:
		return b.edgeStmt(s, &st)
	case ast.NodeAttrs:
		return b.applyAttrs(s.nodeDefaults, ast.AttrList(st))
	case ast.EdgeAttrs:
		return b.applyAttrs(s.edgeDefaults, ast.AttrList(st))
	case ast.GraphAttrs:
		return b.applyAttrs(b.graphAttrs(s), ast.AttrList(st))
	case *ast.Attr:
		return b.applyAttr(b.graphAttrs(s), st)
	case *ast.SubGraph:
		_, err := b.subgraph(s, st, false)
		return err
	}
	return b.errAt(b.toks[0].pos(), "", "", "unsupported statement %T", st)
}

// graphAttrs is where `key=value` and `graph [...]` land: the graph's own
// attributes at the root, the subgraph's (label, color, ...) inside one.
func (b *builder) graphAttrs(s *scope) pipeline.Attrs {
	if s.sub != nil {
		return s.sub.attrs
	}
	return b.g.Attrs
}

func (b *builder) nodeStmt(s *scope, st *ast.NodeStmt) error {
	if first, ok := b.stmtRun(st.NodeID.ID); ok {
		return b.simpleRun(s, first, b.runs[first])
	}
	n, err := b.mention(s, st.NodeID.ID)
	if err != nil {
		return err
	}
	return b.applyAttrs(n.Attrs, st.Attrs)
}

// stmtRun reads the placeholder of a run of simple statements (see
// normalise): the index of its first token.
func (b *builder) stmtRun(id ast.ID) (int, bool) {
	s, ok := strings.CutPrefix(string(id), stmtRunMark)
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(s)
	if _, known := b.runs[i]; err != nil || !known {
		return 0, false
	}
	return i, true
}

// simpleRun builds the simple statements toks[i:end] (see simpleStmt) as
// nodeStmt and edgeStmt build them from gographviz's AST, in the same order
// and with the same checks.
func (b *builder) simpleRun(s *scope, i, end int) error {
	var eps []endpoint
	var ends []int
	for i < end {
		eps, ends = eps[:0], append(ends[:0], 0)
		j := i
		for {
			room := nodeAttrRoom
			if j == i && b.toks[j+1].is("[") { // a node statement: its list says how many
				room = listPairs(b.toks, j+1) + stylesheetAttrs
			}
			n, err := b.mentionTok(s, b.toks[j], room)
			if err != nil {
				return err
			}
			eps = append(eps, endpoint{id: n.ID, pos: b.toks[j].pos()})
			ends = append(ends, len(eps))
			if b.toks[j+1].kind != tArrow {
				break
			}
			j += 2
		}
		j++
		open := -1
		if b.toks[j].is("[") {
			open = j
			for !b.toks[j].is("]") {
				j++
			}
			j++
		}
		if b.toks[j].is(";") {
			j++
		}
		if len(eps) == 1 { // a node statement
			if open >= 0 {
				if err := b.applyAttrList(b.g.Node(eps[0].id).Attrs, open); err != nil {
					return err
				}
			}
		} else {
			explicit := pipeline.Attrs{}
			if open >= 0 {
				if err := b.applyAttrList(explicit, open); err != nil {
					return err
				}
			}
			if err := b.addEdges(s, eps, ends, explicit); err != nil {
				return err
			}
		}
		i = j
	}
	return nil
}

// nodeAttrRoom is how many attributes a node is given room for beyond its
// defaults (a typical stage sets label, prompt, class and a few more, and
// the stylesheet adds llm_model, llm_provider and reasoning_effort).
const nodeAttrRoom = 8

// stylesheetAttrs is how many attributes the stylesheet may add to a node
// (llm_model, llm_provider, reasoning_effort).
const stylesheetAttrs = 3

// listPairs counts the key=value pairs of the plain attribute list opened
// at toks[open].
func listPairs(toks []token, open int) int {
	n := 0
	for j := open + 1; !toks[j].is("]"); j++ {
		if toks[j].is("=") {
			n++
		}
	}
	return n
}

// mention finds or creates the node an ID names, giving a new node the node
// defaults in scope, and records the subgraph it was mentioned in.
func (b *builder) mention(s *scope, id ast.ID) (*pipeline.Node, error) {
	t, ok := b.tok(id)
	if !ok {
		return nil, b.errAt(b.toks[0].pos(), "", "", "node without a name")
	}
	return b.mentionTok(s, t, nodeAttrRoom)
}

// mentionTok is mention of the node token t names.
func (b *builder) mentionTok(s *scope, t token, room int) (*pipeline.Node, error) {
	if err := b.checkNodeID(t); err != nil {
		return nil, err
	}
	n := b.g.Node(t.text)
	if n == nil {
		if len(b.g.Nodes) >= b.lim.MaxNodes {
			return nil, b.errAt(t.pos(), "too many nodes", "split the pipeline into smaller graphs",
				"more than %d nodes", b.lim.MaxNodes)
		}
		// Room for the node's own attributes and the stylesheet's three
		// beside the defaults: a map that grows copies itself.
		attrs := make(pipeline.Attrs, len(s.nodeDefaults)+room)
		maps.Copy(attrs, s.nodeDefaults)
		n = b.g.AddNodeWith(t.text, attrs)
		n.Pos = t.pos()
	}
	if s.sub != nil {
		if subs := b.member[n]; !slices.Contains(subs, s.sub) {
			b.member[n] = append(subs, s.sub)
		}
	}
	for sg := s.sub; sg != nil; sg = sg.parent {
		if sg.collect && !sg.seen[n.ID] {
			sg.seen[n.ID] = true
			sg.mentioned = append(sg.mentioned, n.ID)
		}
	}
	return n, nil
}

// checkNodeID enforces the spec's bare identifiers. A quoted id whose text is
// an identifier ("start") names the same node as the bare one, as in
// Graphviz, so it is accepted.
func (b *builder) checkNodeID(t token) error {
	switch {
	case pipeline.IsIdentifier(t.text) && keywords[strings.ToLower(t.text)]:
		return b.errAt(t.pos(), "keyword node id", fmt.Sprintf("rename the node, e.g. %s_step", t.text),
			"node id %q is a DOT keyword", t.text)
	case pipeline.IsIdentifier(t.text):
		return nil
	case t.quoted():
		id := suggestID(t.text)
		return b.errAt(t.pos(), "quoted node id",
			fmt.Sprintf("use a bare identifier and put the text in label: %s [label=%q]", id, t.text),
			"node id %q is not a bare identifier ([A-Za-z_][A-Za-z0-9_]*)", t.text)
	}
	return b.errAt(t.pos(), "invalid node id",
		fmt.Sprintf("use a bare identifier such as %s and put any display text in label", suggestID(t.text)),
		"node id %q is not an identifier ([A-Za-z_][A-Za-z0-9_]*)", t.text)
}

// suggestID turns display text into an identifier for the fix message.
func suggestID(s string) string {
	var out []byte
	for _, r := range strings.ToLower(s) {
		switch {
		case r < 0x80 && (unicode.IsLetter(r) || unicode.IsDigit(r)):
			out = append(out, byte(r))
		case len(out) > 0 && out[len(out)-1] != '_':
			out = append(out, '_')
		}
	}
	id := strings.Trim(string(out), "_")
	if id == "" || isDigit(id[0]) {
		id = "node_" + id
	}
	return strings.TrimSuffix(id, "_")
}

func (b *builder) edgeStmt(s *scope, st *ast.EdgeStmt) error {
	// The endpoints of every side, in one slice: side i is eps[ends[i]:ends[i+1]].
	eps := make([]endpoint, 0, len(st.EdgeRHS)+1)
	ends := make([]int, 1, len(st.EdgeRHS)+2)
	eps, err := b.location(eps, s, st.Source)
	if err != nil {
		return err
	}
	ends = append(ends, len(eps))
	for _, rh := range st.EdgeRHS {
		if rh.Op != ast.DIRECTED {
			return b.errAt(eps[0].pos, "undirected edge --", "write directed edges with ->",
				"undirected edge '--': Attractor pipelines are directed graphs")
		}
		if eps, err = b.location(eps, s, rh.Destination); err != nil {
			return err
		}
		ends = append(ends, len(eps))
	}
	explicit := pipeline.Attrs{}
	if err := b.applyAttrs(explicit, st.Attrs); err != nil {
		return err
	}
	return b.addEdges(s, eps, ends, explicit)
}

// addEdges adds the edges of an edge statement: from every endpoint of
// side i to every endpoint of side i+1 (side i is eps[ends[i]:ends[i+1]]),
// each with the edge defaults in scope and the statement's own attributes.
func (b *builder) addEdges(s *scope, eps []endpoint, ends []int, explicit pipeline.Attrs) error {
	// The usual a -> b [...] without edge defaults: its one edge takes the
	// statement's own attributes.
	sole := len(eps) == 2 && len(s.edgeDefaults) == 0
	for i := 0; i+2 < len(ends); i++ {
		from, to := eps[ends[i]:ends[i+1]], eps[ends[i+1]:ends[i+2]]
		if len(b.g.Edges)+len(from)*len(to) > b.lim.MaxEdges {
			return b.errAt(from[0].pos, "too many edges", "split the pipeline into smaller graphs",
				"more than %d edges", b.lim.MaxEdges)
		}
		for _, f := range from {
			for _, t := range to {
				attrs := explicit
				if !sole {
					attrs = make(pipeline.Attrs, len(s.edgeDefaults)+len(explicit))
					maps.Copy(attrs, s.edgeDefaults)
					maps.Copy(attrs, explicit)
				}
				// Appended, not AddEdge: build indexes them all at the end,
				// in one piece (pipeline.Graph.Reindex).
				b.g.Edges = append(b.g.Edges, &pipeline.Edge{From: f.id, To: t.id, Attrs: attrs, Pos: f.pos})
			}
		}
	}
	return nil
}

// location appends the endpoints one side of an edge names to eps: a node,
// or every node mentioned in a subgraph (a -> {b c} is a -> b and a -> c,
// as in Graphviz).
func (b *builder) location(eps []endpoint, s *scope, loc ast.Location) ([]endpoint, error) {
	switch loc := loc.(type) {
	case *ast.NodeID:
		n, err := b.mention(s, loc.ID)
		if err != nil {
			return nil, err
		}
		t, _ := b.tok(loc.ID)
		return append(eps, endpoint{id: n.ID, pos: t.pos()}), nil
	case *ast.SubGraph:
		sg, err := b.subgraph(s, loc, true)
		if err != nil {
			return nil, err
		}
		if len(sg.mentioned) == 0 {
			return nil, b.errAt(sg.pos, "edge to empty subgraph", "name at least one node inside the braces",
				"edge to a subgraph that contains no nodes")
		}
		for _, id := range sg.mentioned {
			eps = append(eps, endpoint{id: id, pos: b.g.Node(id).Pos})
		}
		return eps, nil
	}
	return nil, b.errAt(b.toks[0].pos(), "", "", "unsupported edge endpoint %T", loc)
}

// subgraph walks a nested block in a child scope that starts with the
// parent's defaults.
func (b *builder) subgraph(parent *scope, st *ast.SubGraph, endpoint bool) (*subgraph, error) {
	sg := &subgraph{attrs: pipeline.Attrs{}, parent: parent.sub, collect: endpoint}
	if endpoint {
		sg.seen = map[string]bool{}
	}
	if t, ok := b.tok(st.ID); ok {
		sg.pos = t.pos()
		if t.kind != tPunct { // anonymous subgraphs are named after their '{'
			sg.id = t.text
		}
	}
	child := &scope{sub: sg, nodeDefaults: parent.nodeDefaults.Clone(), edgeDefaults: parent.edgeDefaults.Clone()}
	return sg, b.stmts(child, st.StmtList)
}

func (b *builder) applyAttrs(dst pipeline.Attrs, list ast.AttrList) error {
	for _, al := range list {
		for _, a := range al {
			if err := b.applyAttr(dst, a); err != nil {
				return err
			}
		}
	}
	return nil
}

func (b *builder) applyAttr(dst pipeline.Attrs, a *ast.Attr) error {
	if open, ok := b.attrList(a.Field); ok {
		return b.applyAttrList(dst, open)
	}
	key, ok := b.tok(a.Field)
	if !ok {
		return b.errAt(b.toks[0].pos(), "", "", "attribute without a name")
	}
	if err := b.checkKey(key); err != nil {
		return err
	}
	val, ok := b.tok(a.Value)
	if !ok {
		return b.errAt(key.pos(), "attribute without value", fmt.Sprintf("write %s=true (or the value you mean)", key.text),
			"attribute %s has no value", key.text)
	}
	dst[key.text] = val.text
	return nil
}

// attrList reads a whole attribute list's placeholder (see normalise): the
// index of its '['.
func (b *builder) attrList(id ast.ID) (int, bool) {
	s, ok := strings.CutPrefix(string(id), attrListMark)
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(s)
	if err != nil || i < 0 || i >= len(b.toks) || !b.toks[i].is("[") {
		return 0, false
	}
	return i, true
}

// applyAttrList applies the key=value pairs of the plain attribute list
// opened at toks[open], in order.
func (b *builder) applyAttrList(dst pipeline.Attrs, open int) error {
	for j := open + 1; !b.toks[j].is("]"); {
		if !b.toks[j].isName() { // a separator
			j++
			continue
		}
		key := b.toks[j]
		if err := b.checkKey(key); err != nil {
			return err
		}
		dst[key.text] = b.toks[j+2].text
		j += 3
	}
	return nil
}

// checkKey checks an attribute key is an identifier or a qualified one.
func (b *builder) checkKey(key token) error {
	if !pipeline.IsQualifiedID(key.text) {
		return b.errAt(key.pos(), "invalid attribute key",
			"use identifiers joined by dots, e.g. max_retries or human.default_choice",
			"attribute key %q is not an identifier or qualified identifier", key.text)
	}
	return nil
}

// deriveClasses fills Node.Classes (own class list, then subgraph-label
// classes, outermost first) and Node.Subgraphs (named enclosing subgraphs,
// outermost first).
func (b *builder) deriveClasses() {
	for _, n := range b.g.Nodes {
		own := n.Attrs["class"]
		chains := 0
		for _, inner := range b.member[n] {
			for sg := inner; sg != nil; sg = sg.parent {
				chains++
			}
		}
		// Each slice made once, at its largest (a 10,000-node graph made
		// tens of thousands of small slices growing here).
		var classes, subs []string
		if want := strings.Count(own, ",") + 1 + chains; own != "" || chains > 0 {
			classes = make([]string, 0, want)
		}
		if chains > 0 {
			subs = make([]string, 0, chains)
		}
		for rest := own; rest != ""; {
			var c string
			c, rest, _ = strings.Cut(rest, ",")
			if c = strings.TrimSpace(c); c != "" && !slices.Contains(classes, c) {
				classes = append(classes, c)
			}
		}
		var stack [16]*subgraph // most nesting is shallow: no allocation for the chain
		for _, inner := range b.member[n] {
			for _, sg := range chain(stack[:0], inner) {
				if c := sg.labelClass(); c != "" && !slices.Contains(classes, c) {
					classes = append(classes, c)
				}
				if sg.id != "" && !slices.Contains(subs, sg.id) {
					subs = append(subs, sg.id)
				}
				if sg.id != "" && len(sg.attrs) > 0 && b.g.SubgraphAttrs[sg.id] == nil {
					if b.g.SubgraphAttrs == nil {
						b.g.SubgraphAttrs = map[string]pipeline.Attrs{}
					}
					b.g.SubgraphAttrs[sg.id] = sg.attrs
				}
				if l := sg.attrs["label"]; sg.id != "" && l != "" {
					if b.g.SubgraphLabels == nil {
						b.g.SubgraphLabels = map[string]string{}
					}
					b.g.SubgraphLabels[sg.id] = l
				}
			}
		}
		if len(classes) == 0 {
			classes = nil
		}
		if len(subs) == 0 {
			subs = nil
		}
		n.Classes, n.Subgraphs = classes, subs
	}
}

// chain appends a subgraph and its ancestors to out, outermost first.
func chain(out []*subgraph, sg *subgraph) []*subgraph {
	for ; sg != nil; sg = sg.parent {
		out = append(out, sg)
	}
	slices.Reverse(out)
	return out
}

// ClassFromLabel derives the stylesheet class of a subgraph label (spec
// §2.10): lowercase, whitespace to hyphens, and everything but [a-z0-9-]
// dropped, so "Loop A" becomes "loop-a".
func ClassFromLabel(label string) string {
	var out strings.Builder
	for _, r := range strings.ToLower(label) {
		switch {
		case unicode.IsSpace(r):
			out.WriteByte('-')
		case r == '-' || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9'):
			out.WriteRune(r)
		}
	}
	return out.String()
}
