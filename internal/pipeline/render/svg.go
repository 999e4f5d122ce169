package render

import (
	"fmt"
	"strings"

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

type colours struct{ fill, stroke string }

var stateColours = map[string]colours{
	StatePending:  {"#f1f3f5", "#868e96"},
	StateRunning:  {"#fff3bf", "#f08c00"},
	StateSuccess:  {"#d3f9d8", "#2b8a3e"},
	StateFail:     {"#ffe3e3", "#c92a2a"},
	StateRetrying: {"#ffe8cc", "#e8590c"},
	StateWaiting:  {"#f3d9fa", "#ae3ec9"},
}

// handlerColours tint a pipeline drawn without a run, so what kind of
// stage each node is shows at a glance (the shape says it too).
var handlerColours = map[string]colours{
	"start":              {"#e9ecef", "#343a40"},
	"exit":               {"#e9ecef", "#343a40"},
	"wait.human":         {"#f3f0ff", "#7048e8"},
	"conditional":        {"#fff9db", "#e67700"},
	"tool":               {"#e7f5ff", "#1971c2"},
	"parallel":           {"#e3fafc", "#0c8599"},
	"parallel.fan_in":    {"#e3fafc", "#0c8599"},
	"stack.manager_loop": {"#fff4e6", "#d9480f"},
}

var plain = colours{"#ffffff", "#343a40"}

// How edges are stroked: a taken one thick and blue, with an arrowhead of
// its own colour (each edge has its own arrowhead polygon).
const (
	edgeColour  = "#495057"
	takenColour = "#1c7ed6"
)

// Look is how a run looks on its pipeline's graph. The zero Look draws the
// bare pipeline, each node tinted by its handler. (The dashboard marks
// visits and timings on the nodes itself, from data attributes it adds.)
type Look struct {
	// States maps node id to one of the State constants; a node with an
	// unknown state is drawn plain.
	States map[string]string
	// Taken lists the edges the run went along.
	Taken map[EdgeKey]bool
}

// EdgeKey names an edge by its ends.
type EdgeKey struct{ From, To string }

// SVG lays g out with Graphviz's dot (see Lay) and paints it with look.
func SVG(g *pipeline.Graph, look Look) ([]byte, error) {
	l, err := Lay(g)
	if err != nil {
		return nil, err
	}
	return l.SVG(look), nil
}

// SVG paints the layout as a self-contained SVG document: the nodes in the
// shapes Graphviz drew, coloured by their state in look (by their handler
// when look has no states), each edge with its own arrowhead and its label
// where Graphviz put it. Every id and label is XML-escaped, so the document
// can be inlined in a page. The same layout and look give the same bytes.
func (l *Layout) SVG(look Look) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%spt" height="%spt" viewBox="0 0 %s %s" font-family="Helvetica,Arial,sans-serif" data-layout="graphviz %s dot">`+"\n",
		num(l.width), num(l.height), num(l.width), num(l.height), GraphvizVersion)
	fmt.Fprintf(&b, "<!-- Laid out by Graphviz %s (dot), compiled into nanohost -->\n", GraphvizVersion)
	title := ""
	for _, t := range l.title {
		title += t.s
	}
	fmt.Fprintf(&b, "<title>%s</title>\n", xmlText(title))
	b.WriteString(`<rect width="100%" height="100%" fill="#ffffff"/>` + "\n")
	writeTexts(&b, l.title, "#212529", false)
	for _, c := range l.clusters {
		b.WriteString(`<g class="cluster">`)
		writeShapes(&b, c.outline, `fill="#f8f9fa" stroke="#adb5bd" stroke-dasharray="5,3"`, `fill="none" stroke="#adb5bd"`)
		writeTexts(&b, c.label, "#495057", false)
		b.WriteString("</g>\n")
	}
	for _, e := range l.edges {
		writeEdge(&b, e, look.Taken[EdgeKey{e.from, e.to}])
	}
	for _, n := range l.nodes {
		writeNode(&b, n, look)
	}
	b.WriteString("</svg>\n")
	return []byte(b.String())
}

func writeEdge(b *strings.Builder, e placedEdge, taken bool) {
	class, colour, width := "edge", edgeColour, "1.2"
	if taken {
		class, colour, width = class+" taken", takenColour, "3"
	}
	if e.back {
		class += " back"
	}
	fmt.Fprintf(b, `<g class="%s"><title>%s</title>`, class, xmlText(e.from+" -> "+e.to))
	writeShapes(b, e.path, "", fmt.Sprintf(`fill="none" stroke="%s" stroke-width="%s"`, colour, width))
	writeShapes(b, e.head, fmt.Sprintf(`fill="%s" stroke="%s" stroke-width="1"`, colour, colour), fmt.Sprintf(`fill="none" stroke="%s"`, colour))
	writeTexts(b, e.label, "#343a40", true)
	b.WriteString("</g>\n")
}

func writeNode(b *strings.Builder, n placedNode, look Look) {
	state := look.States[n.id]
	c, known := stateColours[state]
	switch {
	case known:
	case look.States == nil:
		state, c = "", handlerColours[n.handler]
		if c.fill == "" {
			c = plain
		}
	default:
		state, c = "", plain
	}
	class := "node"
	if state != "" {
		class += " state-" + state
	}
	fmt.Fprintf(b, `<g class="%s" id="node-%s"><title>%s</title>`, class, xmlText(n.id), xmlText(n.id))
	width, dash := "1.2", ""
	switch state {
	case StateRunning:
		width = "2.5"
	case StateWaiting: // dashed as well as coloured: told apart without colour vision
		width, dash = "2.5", ` stroke-dasharray="6,3"`
	}
	stroke := fmt.Sprintf(`stroke="%s" stroke-width="%s"%s`, c.stroke, width, dash)
	writeShapes(b, n.shapes, fmt.Sprintf(`fill="%s" %s`, c.fill, stroke), `fill="none" `+stroke)
	writeTexts(b, n.texts, "#212529", false)
	b.WriteString("</g>\n")
}

// writeShapes paints outlines: a filled one (the node's body) with the
// filled style, the others with the stroke style.
func writeShapes(b *strings.Builder, shapes []shape, filled, stroked string) {
	for _, s := range shapes {
		style := stroked
		if s.filled && filled != "" {
			style = filled
		}
		switch s.kind {
		case 'p', 'L':
			el := map[byte]string{'p': "polygon", 'L': "polyline"}[s.kind]
			fmt.Fprintf(b, `<%s points="%s" %s/>`, el, points(s.pts), style)
		case 'b':
			if len(s.pts) < 4 {
				continue
			}
			fmt.Fprintf(b, `<path d="M%s,%s`, num(s.pts[0].x), num(s.pts[0].y))
			for i := 1; i+2 < len(s.pts); i += 3 {
				fmt.Fprintf(b, " C%s,%s %s,%s %s,%s", num(s.pts[i].x), num(s.pts[i].y), num(s.pts[i+1].x), num(s.pts[i+1].y), num(s.pts[i+2].x), num(s.pts[i+2].y))
			}
			if s.filled {
				b.WriteString("Z")
			}
			fmt.Fprintf(b, `" %s/>`, style)
		case 'e':
			fmt.Fprintf(b, `<ellipse cx="%s" cy="%s" rx="%s" ry="%s" %s/>`, num(s.pts[0].x), num(s.pts[0].y), num(s.pts[1].x), num(s.pts[1].y), style)
		}
	}
}

func points(pts []point) string {
	s := make([]string, len(pts))
	for i, p := range pts {
		s[i] = num(p.x) + "," + num(p.y)
	}
	return strings.Join(s, " ")
}

// writeTexts writes each line where Graphviz measured and placed it; an
// edge label gets a white halo, so it stays readable where a line crosses it.
func writeTexts(b *strings.Builder, texts []text, fill string, halo bool) {
	for _, t := range texts {
		extra := ""
		if t.bold {
			extra = ` font-weight="bold"`
		}
		if halo {
			extra += ` stroke="#ffffff" stroke-width="3" stroke-opacity="0.85" paint-order="stroke"`
		}
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="%s" font-size="%s" fill="%s"%s>%s</text>`,
			num(t.at.x), num(t.at.y), t.anchor, num(t.size), fill, extra, xmlText(t.s))
	}
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
