package render

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"nanohost/internal/pipeline"
)

// Layout is a pipeline laid out by Graphviz's dot: where every node, edge,
// label and cluster goes, in SVG user units (y down). It never changes once
// made, so a server lays a run's graph out once and paints it with the
// run's progress on every request, from any goroutine, and the nodes stay
// where they are while the run moves through them.
type Layout struct {
	width, height float64
	title         []text
	clusters      []placedCluster
	nodes         []placedNode
	edges         []placedEdge
}

type point struct{ x, y float64 }

// shape is one outline Graphviz drew: a polygon, a polyline, a chain of
// cubic Béziers (pts[0], then three points per segment) or an ellipse
// (pts[0] its centre, pts[1] its radii). filled marks the node's body,
// which takes the node's fill; the rest (peripheries, the ticks of an
// Mdiamond) are strokes.
type shape struct {
	kind   byte // 'p' polygon, 'L' polyline, 'b' Bézier, 'e' ellipse
	filled bool
	pts    []point
}

// text is one line of a label at its baseline.
type text struct {
	at     point
	size   float64
	width  float64 // as Graphviz measured it
	anchor string  // text-anchor
	bold   bool
	s      string
}

type placedNode struct {
	gvid        int // Graphviz's object id, which edges name their ends by
	id, handler string
	box         rect // the node's bounding box
	shapes      []shape
	texts       []text
}

type placedEdge struct {
	from, to string
	back     bool // drawn against the flow: a loop back, or a self loop
	path     []shape
	head     []shape // the arrowhead, one per edge
	label    []text
}

type placedCluster struct {
	outline []shape
	label   []text
}

// rect is an axis-aligned box.
type rect struct{ x0, y0, x1, y1 float64 }

// ErrTooBig is returned for a graph beyond MaxLayoutNodes, MaxLayoutEdges
// or MaxLayoutCost.
var ErrTooBig = errors.New("too big to lay out")

// Lay lays g out with Graphviz's dot. Edges whose ends are not nodes of g
// are left out (there is nothing to draw them to); a graph beyond
// MaxLayoutNodes, MaxLayoutEdges or MaxLayoutCost is refused, with the
// formats that have no limit named.
func Lay(g *pipeline.Graph) (*Layout, error) {
	if len(g.Nodes) > MaxLayoutNodes || len(g.Edges) > MaxLayoutEdges {
		return nil, fmt.Errorf("%w: the pipeline has %d nodes and %d edges; an SVG is laid out for at most %d nodes and %d edges "+
			"(the layout grows faster than the graph) — render it as DOT or Mermaid instead, or split it into smaller pipelines",
			ErrTooBig, len(g.Nodes), len(g.Edges), MaxLayoutNodes, MaxLayoutEdges)
	}
	in := newGraphvizInput(g)
	if cost := layoutCost(in); cost > MaxLayoutCost {
		return nil, fmt.Errorf("%w: the pipeline's %d edges cross so many of its stages that laying it out would take minutes "+
			"(estimated work %d, at most %d) — render it as DOT or Mermaid instead, or split it into smaller pipelines",
			ErrTooBig, len(g.Edges), cost, MaxLayoutCost)
	}
	out, err := layoutJSON(in.src)
	if err != nil {
		return nil, fmt.Errorf("lay out %s: %w", nonEmpty(g.Name, "the pipeline"), err)
	}
	return in.read(out)
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// graphvizInput is the DOT handed to Graphviz: presentation only. Nodes are
// named n0, n1, … and edges e0, e1, … by their index in the pipeline, so no
// author-written id reaches Graphviz; only labels do, as quoted strings
// (never HTML labels), and no other attribute of the pipeline is passed on:
// Graphviz reads files for some (image, shapefile), and weight means
// something else to it than to Attractor.
type graphvizInput struct {
	g     *pipeline.Graph
	index map[string]int   // node id → index, first declaration wins
	edges []*pipeline.Edge // the edges drawn: both ends are nodes
	// captions: per drawn edge, its caption (see drawnEdges)
	captions []string
	back     []bool // per edge: it loops back (see loopBacks)
	src      []byte
}

func newGraphvizInput(g *pipeline.Graph) *graphvizInput {
	in := &graphvizInput{g: g, index: make(map[string]int, len(g.Nodes))}
	for i, n := range g.Nodes {
		if _, dup := in.index[n.ID]; !dup {
			in.index[n.ID] = i
		}
	}
	var b strings.Builder
	b.WriteString("digraph G {\n")
	fmt.Fprintf(&b, "  graph [rankdir=%s, nodesep=0.35, ranksep=0.5, fontname=\"Helvetica-Bold\", fontsize=14, labelloc=t, label=%s]\n",
		rankdir(g), gvString(g.Label()))
	b.WriteString("  node [fontname=\"Helvetica\", fontsize=12, style=filled, margin=\"0.14,0.06\", height=0.42]\n")
	b.WriteString("  edge [fontname=\"Helvetica\", fontsize=10, arrowsize=0.75]\n")
	in.writeClusters(&b)
	for i, n := range g.Nodes {
		if in.index[n.ID] != i {
			continue
		}
		fmt.Fprintf(&b, "  n%d [shape=%s, label=%s]\n", i, gvShape(n.Shape()), gvString(n.Label()))
	}
	in.edges, in.captions = drawnEdges(g.Edges, in.index)
	in.back = loopBacks(g, in.index, in.edges)
	pairs := map[[2]int]bool{} // forward edges, by their ends
	for k, e := range in.edges {
		if !in.back[k] {
			pairs[[2]int{in.index[e.From], in.index[e.To]}] = true
		}
	}
	for k, e := range in.edges {
		from, to, extra := in.index[e.From], in.index[e.To], ""
		switch {
		case !in.back[k]:
		case pairs[[2]int{to, from}]:
			// A loop straight back along an edge: left out of the ranking
			// (reversed, Graphviz would bundle the two and draw them overlapping).
			extra = ", constraint=false"
		default:
			// Reversed for the ranking, so the loop pulls its ends together as
			// any edge does; its arrowhead stays at its target.
			from, to, extra = to, from, ", dir=back"
		}
		fmt.Fprintf(&b, "  n%d -> n%d [id=e%d%s", from, to, k, extra)
		if label := in.captions[k]; label != "" {
			// Padded: Graphviz sets labels side by side with no gap.
			fmt.Fprintf(&b, ", label=%s", gvString(" "+label+" "))
		}
		b.WriteString("]\n")
	}
	b.WriteString("}\n")
	in.src = []byte(b.String())
	return in
}

// writeClusters draws the author's cluster subgraphs (ids starting with
// "cluster", Graphviz's convention) as boxes around their nodes. A node
// goes in its innermost cluster; a cluster nests in the one it was first
// found in, so a node listed in two unrelated clusters cannot make Graphviz
// see a cluster inside itself.
func (in *graphvizInput) writeClusters(b *strings.Builder) {
	type cluster struct {
		id       string
		children []int // cluster indexes
		nodes    []int // node indexes
	}
	clusters := []cluster{{}} // 0 is the graph itself
	byID := map[string]int{}
	for i, n := range in.g.Nodes {
		if in.index[n.ID] != i {
			continue
		}
		parent := 0
		for _, sg := range n.Subgraphs {
			if !strings.HasPrefix(sg, "cluster") {
				continue
			}
			k, seen := byID[sg]
			if !seen {
				k = len(clusters)
				byID[sg] = k
				clusters = append(clusters, cluster{id: sg})
				clusters[parent].children = append(clusters[parent].children, k)
			}
			parent = k
		}
		if parent != 0 {
			clusters[parent].nodes = append(clusters[parent].nodes, i)
		}
	}
	var write func(k int, indent string)
	write = func(k int, indent string) {
		c := clusters[k]
		fmt.Fprintf(b, "%ssubgraph cluster%d {\n", indent, k)
		fmt.Fprintf(b, "%s  graph [label=%s, style=\"rounded,dashed\", fontname=\"Helvetica\", fontsize=11, labeljust=l]\n",
			indent, gvString(in.g.SubgraphLabels[c.id]))
		for _, child := range c.children {
			write(child, indent+"  ")
		}
		for _, n := range c.nodes {
			fmt.Fprintf(b, "%s  n%d\n", indent, n)
		}
		fmt.Fprintf(b, "%s}\n", indent)
	}
	for _, k := range clusters[0].children {
		write(k, "  ")
	}
}

func rankdir(g *pipeline.Graph) string {
	switch d := g.Attrs["rankdir"]; d {
	case "LR", "RL", "BT":
		return d
	}
	return "TB"
}

// gvShape passes the shapes Graphviz knows; anything else (a typo, a
// custom shape a handler matches on) is drawn as a box.
func gvShape(s string) string {
	switch s {
	case "box", "rect", "rectangle", "square", "Mdiamond", "Msquare", "Mcircle", "diamond", "hexagon", "octagon",
		"doubleoctagon", "tripleoctagon", "component", "parallelogram", "house", "invhouse", "ellipse", "oval",
		"circle", "doublecircle", "point", "egg", "triangle", "invtriangle", "trapezium", "invtrapezium",
		"pentagon", "septagon", "note", "tab", "folder", "box3d", "cylinder", "plain", "plaintext", "none":
		return s
	}
	return "box"
}

// gvString quotes s as a Graphviz string whose label text is s itself:
// a backslash is doubled (a label would read \N, \G or \l as escapes), a
// newline becomes a centred line break, and what Graphviz cannot take
// (invalid UTF-8, control characters) becomes U+FFFD.
func gvString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t' || r == '\r':
			b.WriteByte(' ')
		case r < 0x20 || r == 0x7f || r == 0xFFFE || r == 0xFFFF:
			b.WriteRune('\uFFFD')
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// drawnEdges picks the edges to draw (both ends are nodes) and their
// captions. The drawing shows routes, not rules, so edges that would draw
// the same thing become one: parallel edges with the same caption are drawn
// once (a court's two "another round" loops, told apart only by a visit
// count), and a node's self-loops are one loop captioned with each distinct
// label on a line of its own — Graphviz nests several labelled self-loops
// so flat that each loop runs through its neighbour's label.
func drawnEdges(edges []*pipeline.Edge, index map[string]int) (drawn []*pipeline.Edge, captions []string) {
	type route struct{ from, to, caption string }
	seen := map[route]bool{}
	selfLoop := map[string]int{} // node id → its loop's index in drawn
	for _, e := range edges {
		_, okF := index[e.From]
		_, okT := index[e.To]
		caption := edgeLabel(e)
		if !okF || !okT || seen[route{e.From, e.To, caption}] {
			continue
		}
		seen[route{e.From, e.To, caption}] = true
		if k, ok := selfLoop[e.From]; ok && e.From == e.To {
			if caption != "" {
				captions[k] = strings.TrimPrefix(captions[k]+"\n"+caption, "\n")
			}
			continue
		}
		if e.From == e.To {
			selfLoop[e.From] = len(drawn)
		}
		drawn = append(drawn, e)
		captions = append(captions, caption)
	}
	return drawn, captions
}

// edgeLabel is the caption drawn on an edge: its label, else its condition.
func edgeLabel(e *pipeline.Edge) string {
	label := e.Attrs["label"]
	if label == "" {
		label = e.Attrs["condition"]
	}
	return strings.ReplaceAll(label, "\n", " ")
}

// margin around the drawing, in points.
const margin = 8

// read turns Graphviz's JSON into a Layout: y flipped to grow downwards,
// every object mapped back to the pipeline's node or edge by its name.
func (in *graphvizInput) read(out *gvGraph) (*Layout, error) {
	bb, err := parseFloats(out.BB, 4)
	if err != nil {
		return nil, fmt.Errorf("read graphviz's bounding box %q: %w", out.BB, err)
	}
	flip := func(p [2]float64) point { return point{p[0] - bb[0] + margin, bb[3] - p[1] + margin} }
	l := &Layout{width: bb[2] - bb[0] + 2*margin, height: bb[3] - bb[1] + 2*margin, title: texts(out.LDraw, flip)}
	for _, o := range out.Objects {
		if strings.HasPrefix(o.Name, "cluster") {
			l.clusters = append(l.clusters, placedCluster{outline: shapes(o.Draw, flip), label: texts(o.LDraw, flip)})
			continue
		}
		i, err := strconv.Atoi(strings.TrimPrefix(o.Name, "n"))
		if err != nil || i < 0 || i >= len(in.g.Nodes) {
			return nil, fmt.Errorf("graphviz returned a node %q that was not asked for", o.Name)
		}
		box, err := nodeBox(o, flip)
		if err != nil {
			return nil, fmt.Errorf("read the place of node %s: %w", in.g.Nodes[i].ID, err)
		}
		n := in.g.Nodes[i]
		l.nodes = append(l.nodes, placedNode{gvid: o.GVID, id: n.ID, handler: n.HandlerType(), box: box, shapes: shapes(o.Draw, flip), texts: texts(o.LDraw, flip)})
	}
	placed := make(map[int]bool, len(l.nodes)) // Graphviz object ids of nodes
	for _, n := range l.nodes {
		placed[n.gvid] = true
	}
	for _, e := range out.Edges {
		k, err := strconv.Atoi(strings.TrimPrefix(e.ID, "e"))
		if err != nil || k < 0 || k >= len(in.edges) || !placed[e.Tail] || !placed[e.Head] {
			return nil, fmt.Errorf("graphviz returned an edge %q that was not asked for", e.ID)
		}
		pe := placedEdge{from: in.edges[k].From, to: in.edges[k].To, back: in.back[k] || in.edges[k].From == in.edges[k].To,
			path: shapes(e.Draw, flip), head: shapes(e.HDraw, flip), label: texts(e.LDraw, flip)}
		if e.Dir == "back" {
			pe.head = shapes(e.TDraw, flip) // drawn reversed: the arrow is at Graphviz's tail
		}
		pe.label = ontoCurve(pe.label, pe.path)
		l.edges = append(l.edges, pe)
	}
	return l, nil
}

func (n *placedNode) centre() point {
	return point{(n.box.x0 + n.box.x1) / 2, (n.box.y0 + n.box.y1) / 2}
}

// nodeBox is a node's bounding box from its centre and size (in inches).
func nodeBox(o gvObject, flip func([2]float64) point) (rect, error) {
	pos, err := parseFloats(o.Pos, 2)
	if err != nil {
		return rect{}, err
	}
	w, errW := strconv.ParseFloat(o.Width, 64)
	h, errH := strconv.ParseFloat(o.Height, 64)
	if errW != nil || errH != nil {
		return rect{}, fmt.Errorf("size %q × %q is not a number", o.Width, o.Height)
	}
	c := flip([2]float64{pos[0], pos[1]})
	w, h = w*72, h*72
	return rect{c.x - w/2, c.y - h/2, c.x + w/2, c.y + h/2}, nil
}

func parseFloats(s string, n int) ([]float64, error) {
	parts := strings.Split(s, ",")
	if len(parts) != n {
		return nil, fmt.Errorf("want %d numbers", n)
	}
	out := make([]float64, n)
	for i, p := range parts {
		f, err := strconv.ParseFloat(p, 64)
		if err != nil {
			return nil, err
		}
		out[i] = f
	}
	return out, nil
}

// shapes keeps the outlines of an xdot operation list.
func shapes(ops []gvOp, flip func([2]float64) point) []shape {
	var out []shape
	for _, op := range ops {
		var s shape
		switch op.Op {
		case "p", "P", "L", "b", "B":
			s.kind = op.Op[0] | 0x20 // lower case
			if op.Op == "L" {
				s.kind = 'L'
			}
			s.filled = op.Op == "P" || op.Op == "B"
			for _, p := range op.Points {
				s.pts = append(s.pts, flip(p))
			}
		case "e", "E":
			s.kind, s.filled = 'e', op.Op == "E"
			s.pts = []point{flip([2]float64{op.Rect[0], op.Rect[1]}), {op.Rect[2], op.Rect[3]}}
		default:
			continue
		}
		out = append(out, s)
	}
	return out
}

// texts keeps the lines of text of an xdot operation list, each with the
// font set before it.
func texts(ops []gvOp, flip func([2]float64) point) []text {
	var out []text
	size, bold := 14.0, false
	for _, op := range ops {
		switch op.Op {
		case "F":
			size, bold = op.Size, strings.Contains(op.Face, "Bold")
		case "T":
			anchor := map[string]string{"l": "start", "r": "end"}[op.Align]
			out = append(out, text{at: flip(op.Pt), size: size, width: op.Width, anchor: nonEmpty(anchor, "middle"), bold: bold, s: strings.TrimSpace(xdotText(op.Text))})
		}
	}
	return out
}

// xdotText undoes the escaping xdot gives a text's backslashes (Graphviz's
// JSON carries them doubled; quotes come through as they are).
func xdotText(s string) string { return strings.ReplaceAll(s, `\\`, `\`) }

// ontoCurve moves an edge label that Graphviz left away from its edge
// beside it. dot reserves a place for each label in the middle rank and
// routes the edge past it, but among many edges (parallel ones, or ones
// crossing clusters) the curve can end up 20–40 pt away, and the label reads
// as another edge's. Such a label goes to the point of its curve nearest to
// where Graphviz put it, on the same side, just clear of the line.
func ontoCurve(label []text, path []shape) []text {
	if len(label) != 1 || len(path) == 0 {
		return label
	}
	t := label[0]
	w, h := t.width, t.size
	centre := point{t.at.x, t.at.y - h*0.3}
	near, best := point{}, math.Inf(1)
	for _, p := range sampleCurve(path) {
		if d := boxDistance(centre, w, h, p); d < best {
			near, best = p, d
		}
	}
	if best <= 6 || math.IsInf(best, 1) {
		return label
	}
	dx, dy := centre.x-near.x, centre.y-near.y
	n := math.Hypot(dx, dy)
	if n == 0 {
		return label
	}
	ux, uy := dx/n, dy/n
	reach := math.Abs(ux)*w/2 + math.Abs(uy)*h/2 + 3 // centre to the box's edge along u, and a gap
	moved := point{near.x + ux*reach, near.y + uy*reach}
	t.at = point{t.at.x + moved.x - centre.x, t.at.y + moved.y - centre.y}
	return []text{t}
}

// boxDistance is how far p is from the w×h box centred on c (0 inside).
func boxDistance(c point, w, h float64, p point) float64 {
	dx := max(math.Abs(p.x-c.x)-w/2, 0)
	dy := max(math.Abs(p.y-c.y)-h/2, 0)
	return math.Hypot(dx, dy)
}

// sampleCurve returns points every few units along the Bézier outlines.
func sampleCurve(path []shape) []point {
	var out []point
	for _, s := range path {
		if s.kind != 'b' {
			continue
		}
		for i := 0; i+3 < len(s.pts); i += 3 {
			p0, p1, p2, p3 := s.pts[i], s.pts[i+1], s.pts[i+2], s.pts[i+3]
			steps := int(max(8, (dist(p0, p1)+dist(p1, p2)+dist(p2, p3))/3))
			for k := 0; k <= steps; k++ {
				t := float64(k) / float64(steps)
				u := 1 - t
				out = append(out, point{
					u*u*u*p0.x + 3*u*u*t*p1.x + 3*u*t*t*p2.x + t*t*t*p3.x,
					u*u*u*p0.y + 3*u*u*t*p1.y + 3*u*t*t*p2.y + t*t*t*p3.y,
				})
			}
		}
	}
	return out
}

func dist(p, q point) float64 { return math.Hypot(q.x-p.x, q.y-p.y) }
