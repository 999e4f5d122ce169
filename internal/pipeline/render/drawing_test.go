package render

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"strconv"
	"strings"
	"testing"
)

// drawing is what an SVG shows, read back from its XML the way a viewer
// would see it: each node's box, each edge's curve, arrowheads and labels.
type drawing struct {
	nodes map[string]rect // node id → bounding box of its outline
	edges []drawnEdge
}

type drawnEdge struct {
	from, to string
	class    string
	curve    []point // sampled along the path
	heads    [][]point
	labels   []drawnText
}

type drawnText struct {
	at   point
	size float64
	s    string
}

// width estimates how wide the text shows (Helvetica averages about 0.55
// of the font size per character; 0.6 errs on the wide side).
func (t drawnText) box() rect {
	w := float64(len([]rune(t.s))) * t.size * 0.6
	return rect{t.at.x - w/2, t.at.y - t.size*0.8, t.at.x + w/2, t.at.y + t.size*0.25}
}

// readDrawing decodes svg (failing the test if it is not well-formed XML).
func readDrawing(t *testing.T, svg []byte) drawing {
	t.Helper()
	d := drawing{nodes: map[string]rect{}}
	dec := xml.NewDecoder(bytes.NewReader(svg))
	var group []string // class of each open <g>
	var node string
	var edge *drawnEdge
	var textAt *drawnText
	inTitle := false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return d
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v\n%s", err, svg)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			a := attrs(tok)
			switch tok.Name.Local {
			case "g":
				group = append(group, a["class"])
				if strings.HasPrefix(a["class"], "node") {
					node = strings.TrimPrefix(a["id"], "node-")
				}
				if strings.HasPrefix(a["class"], "edge") {
					d.edges = append(d.edges, drawnEdge{class: a["class"]})
					edge = &d.edges[len(d.edges)-1]
				}
			case "title":
				inTitle = edge != nil
			case "polygon", "ellipse", "path", "polyline":
				pts := shapePoints(t, tok.Name.Local, a)
				switch {
				case node != "" && !slicesContain(group, "visits"):
					r, ok := d.nodes[node]
					if !ok {
						r = rect{math.Inf(1), math.Inf(1), math.Inf(-1), math.Inf(-1)}
					}
					for _, p := range pts {
						r = rect{min(r.x0, p.x), min(r.y0, p.y), max(r.x1, p.x), max(r.y1, p.y)}
					}
					d.nodes[node] = r
				case edge != nil && tok.Name.Local == "path":
					edge.curve = append(edge.curve, pts...)
				case edge != nil && tok.Name.Local == "polygon":
					edge.heads = append(edge.heads, pts)
				}
			case "text":
				if edge != nil {
					x, _ := strconv.ParseFloat(a["x"], 64)
					y, _ := strconv.ParseFloat(a["y"], 64)
					size, _ := strconv.ParseFloat(a["font-size"], 64)
					edge.labels = append(edge.labels, drawnText{at: point{x, y}, size: size})
					textAt = &edge.labels[len(edge.labels)-1]
				}
			}
		case xml.CharData:
			if inTitle {
				edge.from, edge.to, _ = strings.Cut(string(tok), " -> ")
			}
			if textAt != nil {
				textAt.s += string(tok)
			}
		case xml.EndElement:
			switch tok.Name.Local {
			case "g":
				if strings.HasPrefix(group[len(group)-1], "node") {
					node = ""
				}
				if strings.HasPrefix(group[len(group)-1], "edge") {
					edge = nil
				}
				group = group[:len(group)-1]
			case "title":
				inTitle = false
			case "text":
				textAt = nil
			}
		}
	}
}

func slicesContain(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func attrs(e xml.StartElement) map[string]string {
	m := map[string]string{}
	for _, a := range e.Attr {
		m[a.Name.Local] = a.Value
	}
	return m
}

// shapePoints returns the points of an outline: a polygon's corners, an
// ellipse's extremes, a path's Bézier curves sampled.
func shapePoints(t *testing.T, el string, a map[string]string) []point {
	t.Helper()
	nums := func(s string) []float64 {
		var out []float64
		for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == ',' || r == 'M' || r == 'C' || r == 'Z' }) {
			v, err := strconv.ParseFloat(f, 64)
			if err != nil {
				t.Fatalf("bad number %q in %s %v", f, el, a)
			}
			out = append(out, v)
		}
		return out
	}
	switch el {
	case "polygon", "polyline":
		v := nums(a["points"])
		var pts []point
		for i := 0; i+1 < len(v); i += 2 {
			pts = append(pts, point{v[i], v[i+1]})
		}
		return pts
	case "ellipse":
		v := nums(a["cx"] + " " + a["cy"] + " " + a["rx"] + " " + a["ry"])
		return []point{{v[0] - v[2], v[1] - v[3]}, {v[0] + v[2], v[1] + v[3]}}
	}
	v := nums(a["d"])
	b := shape{kind: 'b'}
	for i := 0; i+1 < len(v); i += 2 {
		b.pts = append(b.pts, point{v[i], v[i+1]})
	}
	return sampleCurve([]shape{b})
}

func (r rect) overlaps(o rect) bool {
	return r.x0 < o.x1 && o.x0 < r.x1 && r.y0 < o.y1 && o.y0 < r.y1
}

func (r rect) inset(d float64) rect { return rect{r.x0 + d, r.y0 + d, r.x1 - d, r.y1 - d} }

func (r rect) contains(p point) bool { return p.x > r.x0 && p.x < r.x1 && p.y > r.y0 && p.y < r.y1 }

// distance from p to the box (0 inside).
func (r rect) distance(p point) float64 {
	dx := max(r.x0-p.x, 0, p.x-r.x1)
	dy := max(r.y0-p.y, 0, p.y-r.y1)
	return math.Hypot(dx, dy)
}
