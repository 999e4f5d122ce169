package render

import (
	"fmt"
	"math"
	"strings"

	"nanohost/internal/pipeline"
)

// point is a position in SVG user units.
type point struct{ x, y float64 }

// route is one edge ready to draw: a chain of cubic Bézier segments, each
// starting where the previous one ends, and where its label goes.
type route struct {
	e      *pipeline.Edge
	segs   [][4]point
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
// and every arc runs past the nodes of the layers it spans. An arc leaves
// (and enters) a node from the side it runs on only when no other node of
// that layer is on that side; otherwise it goes through the free channel
// between the node's layer and the next (or previous) one, so it never cuts
// through a neighbour.
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

// setCurve makes the route one Bézier and puts the label anchor at its middle.
func (r router) setCurve(rt *route, p [4]point) {
	rt.segs = [][4]point{p}
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

// outermost reports whether node i is the last of its layer on side dir
// (+1 trailing, -1 leading), so an edge can leave it sideways.
func (r router) outermost(i int, dir float64) bool {
	_, c, _, hc := r.ac(i)
	ext := r.extent[r.l.layer[i]]
	if dir > 0 {
		return c+hc >= ext.hi-0.5
	}
	return c-hc <= ext.lo+0.5
}

// channelAfter and channelBefore are the middles of the free gaps after and
// before layer d, along the layer axis.
func (r router) channelAfter(d int) float64 {
	if d+1 < len(r.extent) {
		return (r.extent[d].end + r.extent[d+1].start) / 2
	}
	return r.extent[d].end + gapLayer/2
}

func (r router) channelBefore(d int) float64 {
	if d > 0 {
		return (r.extent[d-1].end + r.extent[d].start) / 2
	}
	return r.extent[d].start - gapLayer/2
}

// arc leaves from on the side facing dir (+1 trailing, -1 leading), runs
// past every layer in between, and enters to from the same side — or, for an
// end that has neighbours on that side, through the channel next to its layer.
func (r router) arc(rt *route, le layoutEdge, dir, extra float64) {
	a0, c0, ha0, hc0 := r.ac(le.from)
	a1, c1, ha1, hc1 := r.ac(le.to)
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
	target := reach + dir*(24+extra)
	fromSide, toSide := r.outermost(le.from, dir), r.outermost(le.to, dir)
	if fromSide && toSide {
		// The curve's extreme is 3/4 of the way to its control points, so aim
		// them far enough out for the extreme to clear reach by 24.
		bulge := (target - (p0c+p3c)/8) / 0.75
		r.setCurve(rt, [4]point{r.xy(a0, p0c), r.xy(a0, bulge), r.xy(a1, bulge), r.xy(a1, p3c)})
		r.placeLabel(rt, dir)
		return
	}
	var way []point
	if fromSide {
		way = append(way, r.xy(a0, p0c), r.xy(a0, target))
	} else {
		ch := r.channelAfter(r.l.layer[le.from]) + extra/2
		way = append(way, r.xy(a0+ha0, c0), r.xy(ch, c0), r.xy(ch, target))
	}
	run := len(way) - 1 // the run past the layers starts here
	if toSide {
		way = append(way, r.xy(a1, target), r.xy(a1, p3c))
	} else {
		ch := r.channelBefore(r.l.layer[le.to]) - extra/2
		way = append(way, r.xy(ch, target), r.xy(ch, c1), r.xy(a1-ha1, c1))
	}
	rt.segs = roundedPath(way, 16)
	rt.at = lerp(way[run], way[run+1], 0.5)
	r.placeLabel(rt, dir)
}

// selfLoop draws a small loop on the trailing side, or into the channel after
// the node's layer when a neighbour sits on that side.
func (r router) selfLoop(rt *route, i int) {
	a, c, ha, hc := r.ac(i)
	if r.outermost(i, +1) {
		side := c + hc
		r.setCurve(rt, [4]point{r.xy(a-8, side), r.xy(a-24, side+36), r.xy(a+24, side+36), r.xy(a+8, side)})
		r.placeLabel(rt, +1)
		return
	}
	face := a + ha
	r.setCurve(rt, [4]point{r.xy(face, c+8), r.xy(face+30, c+24), r.xy(face+30, c-24), r.xy(face, c-8)})
	r.placeLabel(rt, +1)
}

// roundedPath turns a polyline into Bézier segments: straight runs joined by
// quarter-circle-like corners of at most radius.
func roundedPath(way []point, radius float64) [][4]point {
	way = simplify(way)
	if len(way) < 2 {
		return nil
	}
	var segs [][4]point
	line := func(p, q point) {
		if p != q {
			segs = append(segs, [4]point{p, lerp(p, q, 1.0/3), lerp(p, q, 2.0/3), q})
		}
	}
	const k = 0.5523 // control distance of a Bézier quarter circle, per unit radius
	cur := way[0]
	for i := 1; i+1 < len(way); i++ {
		prev, corner, next := way[i-1], way[i], way[i+1]
		rad := min(radius, dist(prev, corner)/2, dist(corner, next)/2)
		in, out := unit(prev, corner), unit(corner, next)
		enter := point{corner.x - in.x*rad, corner.y - in.y*rad}
		leave := point{corner.x + out.x*rad, corner.y + out.y*rad}
		line(cur, enter)
		segs = append(segs, [4]point{enter,
			{enter.x + in.x*rad*k, enter.y + in.y*rad*k},
			{leave.x - out.x*rad*k, leave.y - out.y*rad*k},
			leave})
		cur = leave
	}
	line(cur, way[len(way)-1])
	return segs
}

// simplify drops repeated waypoints and ones in the middle of a straight run.
func simplify(way []point) []point {
	out := make([]point, 0, len(way))
	for _, p := range way {
		if len(out) > 0 && dist(out[len(out)-1], p) < 0.01 {
			continue
		}
		if len(out) >= 2 {
			a, b := out[len(out)-2], out[len(out)-1]
			if math.Abs((b.x-a.x)*(p.y-b.y)-(b.y-a.y)*(p.x-b.x)) < 0.01 {
				out[len(out)-1] = p
				continue
			}
		}
		out = append(out, p)
	}
	return out
}

func lerp(p, q point, t float64) point { return point{p.x + (q.x-p.x)*t, p.y + (q.y-p.y)*t} }

func dist(p, q point) float64 { return math.Hypot(q.x-p.x, q.y-p.y) }

func unit(p, q point) point {
	d := dist(p, q)
	if d == 0 {
		return point{}
	}
	return point{(q.x - p.x) / d, (q.y - p.y) / d}
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

// labelRect is the box the route's label covers (11px text, baseline at.y).
func (rt route) labelRect() rect {
	w := labelWidth(rt.label)
	x0 := map[string]float64{"start": rt.at.x, "middle": rt.at.x - w/2, "end": rt.at.x - w}[rt.anchor]
	return rect{x0, rt.at.y - 11, x0 + w, rt.at.y + 3}
}

// separateLabels moves an edge label that would cover a node or an earlier
// label: first along the layer axis (sliding along its edge, which runs that
// way where labels sit), then outwards, and leaves it where it was when no
// nearby place is free.
func separateLabels(routes []route, boxes []box, horizontal bool) {
	taken := newRectGrid()
	for _, bx := range boxes {
		taken.add(rect{bx.cx - bx.w/2 - 2, bx.cy - bx.h/2 - 2, bx.cx + bx.w/2 + 2, bx.cy + bx.h/2 + 2})
	}
	for i := range routes {
		rt := &routes[i]
		if rt.label == "" {
			continue
		}
		for _, d := range labelMoves(rt, horizontal) {
			moved := *rt
			moved.at = point{rt.at.x + d.x, rt.at.y + d.y}
			if !taken.overlaps(moved.labelRect()) {
				rt.at = moved.at
				break
			}
		}
		taken.add(rt.labelRect())
	}
}

// rectGrid finds overlapping rectangles through a uniform grid of cells, so
// separating the labels of a 10k-edge pipeline stays linear.
type rectGrid struct {
	rects []rect
	cells map[[2]int][]int
}

const gridCell = 128

func newRectGrid() *rectGrid { return &rectGrid{cells: map[[2]int][]int{}} }

func (g *rectGrid) span(r rect, visit func(cell [2]int) bool) {
	for x := int(math.Floor(r.x0 / gridCell)); x <= int(math.Floor(r.x1/gridCell)); x++ {
		for y := int(math.Floor(r.y0 / gridCell)); y <= int(math.Floor(r.y1/gridCell)); y++ {
			if !visit([2]int{x, y}) {
				return
			}
		}
	}
}

func (g *rectGrid) add(r rect) {
	g.rects = append(g.rects, r)
	i := len(g.rects) - 1
	g.span(r, func(cell [2]int) bool {
		g.cells[cell] = append(g.cells[cell], i)
		return true
	})
}

func (g *rectGrid) overlaps(r rect) bool {
	hit := false
	g.span(r, func(cell [2]int) bool {
		for _, i := range g.cells[cell] {
			if g.rects[i].overlaps(r) {
				hit = true
				return false
			}
		}
		return true
	})
	return hit
}

// labelMoves lists the offsets to try, nearest first.
func labelMoves(rt *route, horizontal bool) []point {
	w := labelWidth(rt.label)
	moves := []point{{}}
	for k := 1.0; k <= 3; k++ {
		if horizontal {
			step := w/2 + 6
			moves = append(moves, point{k * step, 0}, point{-k * step, 0}, point{0, -k * 14}, point{0, k * 14})
		} else {
			moves = append(moves, point{0, k * 14}, point{0, -k * 14}, point{k * (w/2 + 6), 0}, point{-k * (w/2 + 6), 0})
		}
	}
	return moves
}

func writeEdge(b *strings.Builder, rt route) {
	fmt.Fprintf(b, `<g class="%s"><title>%s</title><path d="`, rt.class, xmlText(rt.e.From+" -> "+rt.e.To))
	for i, p := range rt.segs {
		if i == 0 {
			fmt.Fprintf(b, "M%s,%s", num(p[0].x), num(p[0].y))
		}
		fmt.Fprintf(b, " C%s,%s %s,%s %s,%s", num(p[1].x), num(p[1].y), num(p[2].x), num(p[2].y), num(p[3].x), num(p[3].y))
	}
	b.WriteString(`" fill="none" stroke="#495057" stroke-width="1.3" marker-end="url(#arrow)"/>`)
	if rt.label != "" {
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="%s" font-size="11" fill="#495057" stroke="#ffffff" stroke-width="3" paint-order="stroke">%s</text>`,
			num(rt.at.x), num(rt.at.y), rt.anchor, xmlText(rt.label))
	}
	b.WriteString("</g>\n")
}
