package render

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"nanohost/internal/pipeline"
)

// Node states the SVG can colour (the dashboard passes the run's view).
const (
	StatePending  = "pending"
	StateRunning  = "running"
	StateSuccess  = "success"
	StateFail     = "fail"
	StateRetrying = "retrying"
	// StateWaiting is a human gate that is open: the run waits for a
	// person, not for an agent, so it must not look like running.
	StateWaiting = "waiting"
)

var stateColours = map[string]struct{ fill, stroke string }{
	StatePending:  {"#f1f3f5", "#868e96"},
	StateRunning:  {"#fff3bf", "#f08c00"},
	StateSuccess:  {"#d3f9d8", "#2b8a3e"},
	StateFail:     {"#ffe3e3", "#c92a2a"},
	StateRetrying: {"#ffe8cc", "#e8590c"},
	StateWaiting:  {"#f3d9fa", "#ae3ec9"},
}

// Layout metrics, in SVG user units.
const (
	fontSize      = 13
	lineHeight    = 17
	charWidth     = 7.4 // average glyph width of a sans-serif font at fontSize
	edgeCharWidth = 6.3 // the same for edge labels (font-size 11)
	padX, padY    = 16, 12
	gapLayer      = 64 // between layers
	gapNode       = 36 // between nodes of a layer
	margin        = 24
)

// box is a placed node: centre, size, and the shape to draw.
type box struct {
	cx, cy, w, h float64
	lines        []string
	shape        string
}

// SVG draws g as a self-contained SVG document without system Graphviz:
// layered layout top to bottom (left to right when rankdir=LR), node shapes
// approximating Graphviz's, edges between neighbouring layers as smooth
// curves, longer forward edges as arcs on one side and back edges as arcs on
// the other. states maps node id to one of pending, running, success, fail,
// retrying and colours those nodes; it may be nil.
func SVG(g *pipeline.Graph, states map[string]string) []byte {
	l, boxes, routes := arrange(g)
	bounds := drawingBounds(boxes, routes)

	title := g.Label()
	top := 0.0
	if title != "" {
		top = lineHeight + 8
	}
	width := max(bounds.x1-bounds.x0+2*margin, charWidth*float64(utf8.RuneCountInString(title))+2*margin)
	height := bounds.y1 - bounds.y0 + 2*margin + top
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%s" height="%s" viewBox="0 0 %s %s" font-family="Helvetica,Arial,sans-serif" font-size="%d">`+"\n",
		num(width), num(height), num(width), num(height), fontSize)
	fmt.Fprintf(&b, "<title>%s</title>\n", xmlText(title))
	b.WriteString(`<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" markerHeight="8" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#495057"/></marker></defs>` + "\n")
	b.WriteString(`<rect width="100%" height="100%" fill="#ffffff"/>` + "\n")
	if title != "" {
		fmt.Fprintf(&b, `<text x="%s" y="%d" text-anchor="middle" font-weight="bold">%s</text>`+"\n", num(width/2), lineHeight+4, xmlText(title))
	}
	fmt.Fprintf(&b, `<g transform="translate(%s,%s)">`+"\n", num(margin-bounds.x0), num(margin+top-bounds.y0))
	for _, r := range routes {
		writeEdge(&b, r)
	}
	for i, n := range l.nodes {
		writeNode(&b, n, boxes[i], states[n.ID])
	}
	b.WriteString("</g>\n</svg>\n")
	return []byte(b.String())
}

// arrange lays g out: the layers, a placed box per node, a route per edge
// with its label moved clear of nodes and other labels.
func arrange(g *pipeline.Graph) (*layered, []box, []route) {
	l := layout(g)
	horizontal := g.Attrs["rankdir"] == "LR" || g.Attrs["rankdir"] == "RL"
	boxes, extent := place(l, horizontal)
	routes := routeEdges(l, boxes, extent, horizontal)
	separateLabels(routes, boxes, horizontal)
	return l, boxes, routes
}

// layerExtent is where the nodes of one layer are: lo..hi across the layer
// axis (x when drawing top to bottom), which arcs keep clear of, and
// start..end along it, whose gaps to the next layers are the free channels
// that edges run in.
type layerExtent struct{ lo, hi, start, end float64 }

// place sizes every node and assigns coordinates layer by layer, centring
// each layer on the widest one.
func place(l *layered, horizontal bool) ([]box, []layerExtent) {
	boxes := make([]box, len(l.nodes))
	for i, n := range l.nodes {
		boxes[i] = sizeNode(n)
	}
	// Along the layer axis each layer is as thick as its biggest node; across
	// it, nodes sit side by side.
	along := func(bx box) float64 { return pick(horizontal, bx.w, bx.h) }
	across := func(bx box) float64 { return pick(horizontal, bx.h, bx.w) }
	thickness := make([]float64, len(l.layers))
	spread := make([]float64, len(l.layers))
	maxSpread := 0.0
	for d, layer := range l.layers {
		for k, n := range layer {
			thickness[d] = max(thickness[d], along(boxes[n]))
			spread[d] += across(boxes[n])
			if k > 0 {
				spread[d] += gapNode
			}
		}
		maxSpread = max(maxSpread, spread[d])
	}
	gaps := layerGaps(l, horizontal)
	extent := make([]layerExtent, len(l.layers))
	pos := 0.0
	for d, layer := range l.layers {
		cursor := (maxSpread - spread[d]) / 2
		extent[d] = layerExtent{lo: cursor, hi: cursor + spread[d], start: pos, end: pos + thickness[d]}
		for _, n := range layer {
			a := pos + thickness[d]/2
			c := cursor + across(boxes[n])/2
			boxes[n].cx, boxes[n].cy = pick(horizontal, a, c), pick(horizontal, c, a)
			cursor += across(boxes[n]) + gapNode
		}
		pos += thickness[d] + gaps[d]
	}
	return boxes, extent
}

func pick(cond bool, a, b float64) float64 {
	if cond {
		return a
	}
	return b
}

// edgeLabel is the caption drawn on an edge: its label, else its condition.
func edgeLabel(e *pipeline.Edge) string {
	label := e.Attrs["label"]
	if label == "" {
		label = e.Attrs["condition"]
	}
	return strings.ReplaceAll(label, "\n", " ")
}

func labelWidth(label string) float64 {
	return float64(utf8.RuneCountInString(label)) * edgeCharWidth
}

// layerGaps widens the gap after a layer when, left to right, the labels
// of edges into the next layer would not fit between the nodes.
func layerGaps(l *layered, horizontal bool) []float64 {
	gaps := make([]float64, len(l.layers))
	for d := range gaps {
		gaps[d] = gapLayer
	}
	if !horizontal {
		return gaps
	}
	for _, le := range l.edges {
		if from := l.layer[le.from]; !le.back && l.layer[le.to] == from+1 {
			gaps[from] = max(gaps[from], labelWidth(edgeLabel(le.e))+24)
		}
	}
	return gaps
}

// rect is an axis-aligned bounding box.
type rect struct{ x0, y0, x1, y1 float64 }

func (r *rect) add(x, y float64) {
	r.x0, r.y0, r.x1, r.y1 = min(r.x0, x), min(r.y0, y), max(r.x1, x), max(r.y1, y)
}

func (r rect) overlaps(o rect) bool {
	return r.x0 < o.x1 && o.x0 < r.x1 && r.y0 < o.y1 && o.y0 < r.y1
}

// drawingBounds covers every node, curve (by its control points) and label.
func drawingBounds(boxes []box, routes []route) rect {
	if len(boxes) == 0 {
		return rect{}
	}
	r := rect{boxes[0].cx, boxes[0].cy, boxes[0].cx, boxes[0].cy}
	for _, bx := range boxes {
		r.add(bx.cx-bx.w/2-8, bx.cy-bx.h/2) // 8: the tabs of a component
		r.add(bx.cx+bx.w/2, bx.cy+bx.h/2)
	}
	for _, rt := range routes {
		for _, seg := range rt.segs {
			for _, p := range seg {
				r.add(p.x, p.y)
			}
		}
		if rt.label != "" {
			lr := rt.labelRect()
			r.add(lr.x0, lr.y0)
			r.add(lr.x1, lr.y1)
		}
	}
	return r
}

func sizeNode(n *pipeline.Node) box {
	lines := strings.Split(n.Label(), "\n")
	longest := 0
	for _, line := range lines {
		longest = max(longest, utf8.RuneCountInString(line))
	}
	w := max(80, float64(longest)*charWidth+2*padX)
	h := max(36, float64(len(lines))*lineHeight+2*padY)
	shape := n.Shape()
	switch shape {
	case "diamond", "Mdiamond":
		w, h = w*1.5, h*1.5 // text must fit inside the rhombus
	case "hexagon", "tripleoctagon", "ellipse", "oval", "circle", "doublecircle":
		w, h = w*1.2, h*1.15
	case "house":
		h *= 1.3
	}
	return box{w: w, h: h, lines: lines, shape: shape}
}

func writeNode(b *strings.Builder, n *pipeline.Node, bx box, state string) {
	colours, known := stateColours[state]
	if !known {
		colours.fill, colours.stroke = "#ffffff", "#343a40"
		state = ""
	}
	class := "node"
	if state != "" {
		class += " state-" + state
	}
	fmt.Fprintf(b, `<g class="%s" id="node-%s"><title>%s</title>`+"\n", class, xmlText(n.ID), xmlText(n.ID))
	style := fmt.Sprintf(`fill="%s" stroke="%s" stroke-width="%s"`, colours.fill, colours.stroke, pickStr(state == StateRunning || state == StateWaiting, "2.5", "1.5"))
	b.WriteString(shapeSVG(bx, style))
	y := bx.cy - float64(len(bx.lines)-1)*lineHeight/2 + fontSize*0.35
	for i, line := range bx.lines {
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle">%s</text>`+"\n", num(bx.cx), num(y+float64(i)*lineHeight), xmlText(line))
	}
	b.WriteString("</g>\n")
}

func pickStr(cond bool, a, b string) string {
	if cond {
		return a
	}
	return b
}

// shapeSVG approximates the Graphviz shape of a node.
func shapeSVG(bx box, style string) string {
	x0, y0, x1, y1 := bx.cx-bx.w/2, bx.cy-bx.h/2, bx.cx+bx.w/2, bx.cy+bx.h/2
	cx, cy, w, h := bx.cx, bx.cy, bx.w, bx.h
	rect := func(inset float64) string {
		return fmt.Sprintf(`<rect x="%s" y="%s" width="%s" height="%s" rx="3" %s/>`+"\n",
			num(x0+inset), num(y0+inset), num(w-2*inset), num(h-2*inset), style)
	}
	poly := func(pts ...float64) string {
		var s []string
		for i := 0; i+1 < len(pts); i += 2 {
			s = append(s, num(pts[i])+","+num(pts[i+1]))
		}
		return fmt.Sprintf(`<polygon points="%s" %s/>`+"\n", strings.Join(s, " "), style)
	}
	ellipse := func(inset float64) string {
		return fmt.Sprintf(`<ellipse cx="%s" cy="%s" rx="%s" ry="%s" %s/>`+"\n", num(cx), num(cy), num(w/2-inset), num(h/2-inset), style)
	}
	switch bx.shape {
	case "diamond":
		return poly(cx, y0, x1, cy, cx, y1, x0, cy)
	case "Mdiamond": // diamond with the corners ticked, as Graphviz draws it
		return poly(cx, y0, x1, cy, cx, y1, x0, cy) + ticks(bx)
	case "Msquare":
		return rect(0) + rect(4)
	case "hexagon":
		q := w / 4
		return poly(x0+q, y0, x1-q, y0, x1, cy, x1-q, y1, x0+q, y1, x0, cy)
	case "tripleoctagon", "octagon":
		qx, qy := w*0.2, h*0.3
		oct := poly(x0+qx, y0, x1-qx, y0, x1, y0+qy, x1, y1-qy, x1-qx, y1, x0+qx, y1, x0, y1-qy, x0, y0+qy)
		if bx.shape == "octagon" {
			return oct
		}
		in := 4.0
		return oct + poly(x0+qx+in/2, y0+in, x1-qx-in/2, y0+in, x1-in, y0+qy+in/2, x1-in, y1-qy-in/2,
			x1-qx-in/2, y1-in, x0+qx+in/2, y1-in, x0+in, y1-qy-in/2, x0+in, y0+qy+in/2)
	case "parallelogram":
		s := w * 0.15
		return poly(x0+s, y0, x1, y0, x1-s, y1, x0, y1)
	case "house":
		roof := h * 0.35
		return poly(cx, y0, x1, y0+roof, x1, y1, x0, y1, x0, y0+roof)
	case "component":
		tab := fmt.Sprintf(`<rect x="%s" y="%s" width="12" height="7" %s/>`+"\n", num(x0-6), num(y0+h*0.25-3.5), style)
		tab2 := fmt.Sprintf(`<rect x="%s" y="%s" width="12" height="7" %s/>`+"\n", num(x0-6), num(y0+h*0.75-3.5), style)
		return rect(0) + tab + tab2
	case "ellipse", "oval", "circle":
		return ellipse(0)
	case "doublecircle":
		return ellipse(0) + ellipse(4)
	}
	return rect(0)
}

// ticks draws the short strokes that cut off the corners of an Mdiamond,
// sized so each stroke ends on the diamond's edges.
func ticks(bx box) string {
	const d = 9.0         // distance of each stroke from its corner
	hw := d * bx.w / bx.h // half length of the top/bottom strokes
	hh := d * bx.h / bx.w // half length of the left/right strokes
	x0, y0, x1, y1 := bx.cx-bx.w/2, bx.cy-bx.h/2, bx.cx+bx.w/2, bx.cy+bx.h/2
	return fmt.Sprintf(`<path d="M%s,%s H%s M%s,%s H%s M%s,%s V%s M%s,%s V%s" stroke="#343a40" fill="none"/>`+"\n",
		num(bx.cx-hw), num(y0+d), num(bx.cx+hw),
		num(bx.cx-hw), num(y1-d), num(bx.cx+hw),
		num(x0+d), num(bx.cy-hh), num(bx.cy+hh),
		num(x1-d), num(bx.cy-hh), num(bx.cy+hh))
}

// num formats a coordinate compactly and deterministically.
func num(f float64) string {
	s := fmt.Sprintf("%.1f", f)
	return strings.TrimSuffix(s, ".0")
}

// xmlText escapes text for element content and attribute values, replacing
// bytes XML cannot carry at all (invalid UTF-8, control characters).
func xmlText(s string) string {
	var b strings.Builder
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		switch {
		case r == '<':
			b.WriteString("&lt;")
		case r == '>':
			b.WriteString("&gt;")
		case r == '&':
			b.WriteString("&amp;")
		case r == '"':
			b.WriteString("&quot;")
		case r == '\'':
			b.WriteString("&#39;")
		case r == '\t' || r == '\n' || r == '\r':
			b.WriteByte(' ')
		case r < 0x20 || r == 0xFFFE || r == 0xFFFF || (r >= 0xD800 && r <= 0xDFFF):
			b.WriteRune('\uFFFD')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
