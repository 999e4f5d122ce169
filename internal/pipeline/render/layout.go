package render

import (
	"slices"
	"sort"

	"nanohost/internal/pipeline"
)

// layered is a simple Sugiyama-style layout: back edges (see
// markBackEdges) are set aside so the rest is acyclic, every node goes on
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

// markBackEdges picks the edges that loop back, so that the rest is acyclic
// and reads in the order a run goes. An edge is a back edge when it lies on a
// cycle (both ends in one strongly connected component) and leads to a node
// nearer the start (BFS depth), or as near and DFS from the start finds it
// closing a cycle. Depth alone would turn a chain with a shortcut
// (plan -> implement -> validate, plan -> validate) sideways; DFS alone
// picks a forward edge when a loop has several entries (postmortem -> each
// of three parallel plans, reached by DFS before their real predecessor).
// Every cycle keeps at least one back edge: around a cycle depth cannot only
// grow, and a cycle of equal depths contains a DFS back edge.
func (l *layered) markBackEdges(g *pipeline.Graph, out [][]int) {
	roots := make([]int, 0, len(l.nodes)+1)
	if s := g.StartNode(); s != nil {
		roots = append(roots, l.index[s.ID])
	}
	for i := range l.nodes {
		roots = append(roots, i)
	}
	depth := l.bfsDepths(roots, out)
	dfsBack := l.dfsBackEdges(roots, out)
	comp := l.components(out)
	for i := range l.edges {
		le := &l.edges[i]
		if comp[le.from] != comp[le.to] {
			continue
		}
		df, dt := depth[le.from], depth[le.to]
		le.back = dt < df || (dt == df && dfsBack[i])
	}
}

// bfsDepths numbers each node by its BFS distance from the first root that
// reaches it (the start node first).
func (l *layered) bfsDepths(roots []int, out [][]int) []int {
	depth := make([]int, len(l.nodes))
	for i := range depth {
		depth[i] = -1
	}
	queue := make([]int, 0, len(l.nodes))
	for _, root := range roots {
		if depth[root] >= 0 {
			continue
		}
		depth[root] = 0
		queue = append(queue[:0], root)
		for len(queue) > 0 {
			n := queue[0]
			queue = queue[1:]
			for _, ei := range out[n] {
				if to := l.edges[ei].to; depth[to] < 0 {
					depth[to] = depth[n] + 1
					queue = append(queue, to)
				}
			}
		}
	}
	return depth
}

// dfsBackEdges runs an iterative DFS (pipelines can be long chains) from the
// roots in order and reports, per edge, whether it leads to a node still on
// the DFS stack.
func (l *layered) dfsBackEdges(roots []int, out [][]int) []bool {
	const (
		white = iota
		grey
		black
	)
	back := make([]bool, len(l.edges))
	colour := make([]int, len(l.nodes))
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
				back[ei] = true
			case white:
				colour[to] = grey
				stack = append(stack, frame{node: to})
			}
		}
	}
	return back
}

// components labels the strongly connected components (Kosaraju, iterative):
// two nodes share a label when each reaches the other.
func (l *layered) components(out [][]int) []int {
	n := len(l.nodes)
	in := make([][]int, n)
	for ei, le := range l.edges {
		in[le.to] = append(in[le.to], ei)
	}
	// First pass: nodes in order of DFS completion.
	order := make([]int, 0, n)
	seen := make([]bool, n)
	type frame struct{ node, next int }
	for root := range n {
		if seen[root] {
			continue
		}
		seen[root] = true
		stack := []frame{{node: root}}
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			if top.next == len(out[top.node]) {
				order = append(order, top.node)
				stack = stack[:len(stack)-1]
				continue
			}
			to := l.edges[out[top.node][top.next]].to
			top.next++
			if !seen[to] {
				seen[to] = true
				stack = append(stack, frame{node: to})
			}
		}
	}
	// Second pass: on the reversed graph, latest finisher first.
	comp := make([]int, n)
	for i := range comp {
		comp[i] = -1
	}
	label := 0
	for k := n - 1; k >= 0; k-- {
		root := order[k]
		if comp[root] >= 0 {
			continue
		}
		comp[root] = label
		stack := []int{root}
		for len(stack) > 0 {
			v := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, ei := range in[v] {
				if from := l.edges[ei].from; comp[from] < 0 {
					comp[from] = label
					stack = append(stack, from)
				}
			}
		}
		label++
	}
	return comp
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
