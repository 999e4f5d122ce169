package render

import (
	"slices"
	"sort"

	"nanohost/internal/pipeline"
)

// layered is a simple Sugiyama-style layout: back edges found by DFS from
// the start node are set aside so the rest is acyclic, every node goes on
// the layer one past its deepest predecessor (longest-path layering), and
// one barycentre sweep orders each layer to reduce crossings.
type layered struct {
	nodes  []*pipeline.Node
	index  map[string]int
	layer  []int
	layers [][]int // node indexes per layer, in drawing order
	edges  []layoutEdge
}

type layoutEdge struct {
	e        *pipeline.Edge
	from, to int
	back     bool // drawn as a curve: back edge, same-layer edge or self loop
}

func layout(g *pipeline.Graph) *layered {
	l := &layered{nodes: g.Nodes, index: make(map[string]int, len(g.Nodes))}
	for i, n := range g.Nodes {
		if _, dup := l.index[n.ID]; !dup {
			l.index[n.ID] = i
		}
	}
	out := make([][]int, len(g.Nodes)) // edge indexes leaving each node
	for _, e := range g.Edges {
		from, okF := l.index[e.From]
		to, okT := l.index[e.To]
		if !okF || !okT {
			continue // edge to an undeclared node: nothing to draw it to
		}
		out[from] = append(out[from], len(l.edges))
		l.edges = append(l.edges, layoutEdge{e: e, from: from, to: to})
	}
	l.markBackEdges(g, out)
	l.assignLayers(out)
	l.orderLayers()
	for i := range l.edges {
		le := &l.edges[i]
		if l.layer[le.to] <= l.layer[le.from] {
			le.back = true
		}
	}
	return l
}

// markBackEdges runs an iterative DFS (pipelines can be long chains) from
// the start node, then from every node not yet visited, in declaration order.
func (l *layered) markBackEdges(g *pipeline.Graph, out [][]int) {
	const (
		white = iota
		grey
		black
	)
	colour := make([]int, len(l.nodes))
	roots := make([]int, 0, len(l.nodes))
	if s := g.StartNode(); s != nil {
		roots = append(roots, l.index[s.ID])
	}
	for i := range l.nodes {
		roots = append(roots, i)
	}
	type frame struct{ node, next int }
	for _, root := range roots {
		if colour[root] != white {
			continue
		}
		stack := []frame{{node: root}}
		colour[root] = grey
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			if top.next == len(out[top.node]) {
				colour[top.node] = black
				stack = stack[:len(stack)-1]
				continue
			}
			ei := out[top.node][top.next]
			top.next++
			switch to := l.edges[ei].to; colour[to] {
			case grey:
				l.edges[ei].back = true
			case white:
				colour[to] = grey
				stack = append(stack, frame{node: to})
			}
		}
	}
}

// assignLayers does longest-path layering over the forward edges in
// topological order (Kahn's algorithm, ties in declaration order).
func (l *layered) assignLayers(out [][]int) {
	indeg := make([]int, len(l.nodes))
	for _, le := range l.edges {
		if !le.back {
			indeg[le.to]++
		}
	}
	l.layer = make([]int, len(l.nodes))
	queue := make([]int, 0, len(l.nodes))
	for i := range l.nodes {
		if indeg[i] == 0 {
			queue = append(queue, i)
		}
	}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		for _, ei := range out[n] {
			le := l.edges[ei]
			if le.back {
				continue
			}
			l.layer[le.to] = max(l.layer[le.to], l.layer[n]+1)
			if indeg[le.to]--; indeg[le.to] == 0 {
				queue = append(queue, le.to)
			}
		}
	}
	depth := 0
	for _, d := range l.layer {
		depth = max(depth, d)
	}
	l.layers = make([][]int, depth+1)
	for i, d := range l.layer {
		l.layers[d] = append(l.layers[d], i)
	}
}

// orderLayers sorts each layer by the mean position of the node's
// predecessors on earlier layers; nodes without any keep their place.
func (l *layered) orderLayers() {
	pos := make([]float64, len(l.nodes))
	preds := make([][]int, len(l.nodes))
	for _, le := range l.edges {
		if !le.back && le.from != le.to {
			preds[le.to] = append(preds[le.to], le.from)
		}
	}
	for d, layer := range l.layers {
		if d > 0 {
			key := make(map[int]float64, len(layer))
			for i, n := range layer {
				key[n] = float64(i)
				if len(preds[n]) > 0 {
					sum := 0.0
					for _, p := range preds[n] {
						sum += pos[p]
					}
					key[n] = sum / float64(len(preds[n]))
				}
			}
			sort.SliceStable(layer, func(a, b int) bool { return key[layer[a]] < key[layer[b]] })
		}
		for i, n := range layer {
			pos[n] = float64(i)
		}
	}
}

// layerIDs returns the node ids of each layer in drawing order.
func (l *layered) layerIDs() [][]string {
	out := make([][]string, len(l.layers))
	for d, layer := range l.layers {
		for _, n := range layer {
			out[d] = append(out[d], l.nodes[n].ID)
		}
		out[d] = slices.Clip(out[d])
	}
	return out
}
