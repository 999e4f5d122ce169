package render

import (
	"fmt"
	"strings"

	"nanohost/internal/pipeline"
)

// point is a position in SVG user units.
type point struct{ x, y float64 }

// route is one edge ready to draw: a cubic Bézier and where its label goes.
type route struct {
	e      *pipeline.Edge
	pts    [4]point
	class  string
	label  string
	at     point
	anchor string // text-anchor of the label
}

// The router works in layer coordinates — a runs along the layers (down, or
// right when horizontal), c across them — so one set of rules serves both
// directions:
//   - an edge to the next layer is an S-curve between facing sides;
//   - a longer forward edge is an arc on the leading side (left, or top);
//   - a back edge, an edge within a layer and a self loop are arcs on the
//     trailing side (right, or bottom);
//
// and every arc bulges past the nodes of the layers it spans.
type router struct {
	l          *layered
	boxes      []box
	extent     []layerExtent
	horizontal bool
}

func routeEdges(l *layered, boxes []box, extent []layerExtent, horizontal bool) []route {
	r := router{l: l, boxes: boxes, extent: extent, horizontal: horizontal}
	routes := make([]route, 0, len(l.edges))
	lead, trail := 0, 0
	for _, le := range l.edges {
		rt := route{e: le.e, class: "edge", label: edgeLabel(le.e)}
		span := l.layer[le.to] - l.layer[le.from]
		switch {
		case le.from == le.to:
			rt.class += " back"
			r.selfLoop(&rt, le.from)
		case le.back:
			rt.class += " back"
			trail++
			r.arc(&rt, le, +1, float64(trail%4)*10)
		case span > 1:
			lead++
			r.arc(&rt, le, -1, float64(lead%4)*10)
		default:
			r.sCurve(&rt, le)
		}
		routes = append(routes, rt)
	}
	return routes
}

// ac returns a box's centre and half sizes in layer coordinates.
func (r router) ac(i int) (a, c, halfA, halfC float64) {
	bx := r.boxes[i]
	if r.horizontal {
		return bx.cx, bx.cy, bx.w / 2, bx.h / 2
	}
	return bx.cy, bx.cx, bx.h / 2, bx.w / 2
}

// xy converts layer coordinates to SVG coordinates.
func (r router) xy(a, c float64) point {
	if r.horizontal {
		return point{a, c}
	}
	return point{c, a}
}

func (r router) setCurve(rt *route, p [4]point) {
	rt.pts = p
	rt.at = point{(p[0].x + 3*p[1].x + 3*p[2].x + p[3].x) / 8, (p[0].y + 3*p[1].y + 3*p[2].y + p[3].y) / 8}
}

func (r router) sCurve(rt *route, le layoutEdge) {
	a0, c0, ha0, _ := r.ac(le.from)
	a1, c1, ha1, _ := r.ac(le.to)
	start, end := a0+ha0, a1-ha1
	mid := (start + end) / 2
	r.setCurve(rt, [4]point{r.xy(start, c0), r.xy(mid, c0), r.xy(mid, c1), r.xy(end, c1)})
	r.placeLabel(rt, pick(r.horizontal, -1, +1)) // above, or to the right
}

// arc leaves from's side facing dir (+1 trailing, -1 leading) and enters
// to's same side, bulging past every layer in between.
func (r router) arc(rt *route, le layoutEdge, dir, extra float64) {
	a0, c0, _, hc0 := r.ac(le.from)
	a1, c1, _, hc1 := r.ac(le.to)
	p0c, p3c := c0+dir*hc0, c1+dir*hc1
	lo, hi := min(r.l.layer[le.from], r.l.layer[le.to]), max(r.l.layer[le.from], r.l.layer[le.to])
	reach := p0c // the farthest any node in the spanned layers extends on this side
	for d := lo; d <= hi; d++ {
		if dir > 0 {
			reach = max(reach, r.extent[d].hi)
		} else {
			reach = min(reach, r.extent[d].lo)
		}
	}
	// The curve's extreme is 3/4 of the way to its control points, so aim
	// them far enough out for the extreme to clear reach by 24.
	target := reach + dir*(24+extra)
	bulge := (target - (p0c+p3c)/8) / 0.75
	r.setCurve(rt, [4]point{r.xy(a0, p0c), r.xy(a0, bulge), r.xy(a1, bulge), r.xy(a1, p3c)})
	r.placeLabel(rt, dir)
}

func (r router) selfLoop(rt *route, i int) {
	a, c, _, hc := r.ac(i)
	side := c + hc
	r.setCurve(rt, [4]point{r.xy(a-8, side), r.xy(a-24, side+36), r.xy(a+24, side+36), r.xy(a+8, side)})
	r.placeLabel(rt, +1)
}

// placeLabel puts the label just outside the curve's midpoint, on the side
// dir points to.
func (r router) placeLabel(rt *route, dir float64) {
	if r.horizontal {
		rt.anchor = "middle"
		rt.at.y += pick(dir > 0, 14, -5)
		return
	}
	rt.anchor = map[bool]string{true: "start", false: "end"}[dir > 0]
	rt.at.x += dir * 6
	rt.at.y += 4
}

func writeEdge(b *strings.Builder, rt route) {
	p := rt.pts
	fmt.Fprintf(b, `<g class="%s"><title>%s</title><path d="M%s,%s C%s,%s %s,%s %s,%s" fill="none" stroke="#495057" stroke-width="1.3" marker-end="url(#arrow)"/>`,
		rt.class, xmlText(rt.e.From+" -> "+rt.e.To),
		num(p[0].x), num(p[0].y), num(p[1].x), num(p[1].y), num(p[2].x), num(p[2].y), num(p[3].x), num(p[3].y))
	if rt.label != "" {
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="%s" font-size="11" fill="#495057" stroke="#ffffff" stroke-width="3" paint-order="stroke">%s</text>`,
			num(rt.at.x), num(rt.at.y), rt.anchor, xmlText(rt.label))
	}
	b.WriteString("</g>\n")
}
