package render

import "nanohost/internal/pipeline"

// loopBacks picks the edges that loop back against the pipeline's flow, so
// they can be drawn upwards and the rest reads top to bottom in the order a
// run goes. Graphviz would pick them itself by a depth-first search in
// declaration order, and that search follows a shortcut first: in the F0–F6
// circuit it reaches the review through "recall -> review [hit]" and then
// takes "correlate -> review" for a loop, drawing the review above the
// investigation that leads to it.
//
// Instead the nodes are placed in topological order from the start node
// (Kahn's algorithm), each once all its predecessors are placed. When every
// node left waits on another (they lie on cycles), the one waiting on the
// fewest edges is placed next (ties: a node next to the placed ones, then
// the one declared first) and the edges it still waits on are the loop
// backs. A node thus waits for every way into it but the loops, and the
// result has no cycle left. Self loops are not returned: Graphviz draws
// them beside their node.
func loopBacks(g *pipeline.Graph, index map[string]int, edges []*pipeline.Edge) []bool {
	n := len(g.Nodes)
	back := make([]bool, len(edges))
	waiting := make([]int, n) // unplaced predecessors' edges into each node
	near := make([]bool, n)   // has a placed predecessor
	out := make([][]int, n)   // edge indexes leaving each node
	in := make([][]int, n)
	for k, e := range edges {
		from, to := index[e.From], index[e.To]
		if from == to {
			continue
		}
		out[from] = append(out[from], k)
		in[to] = append(in[to], k)
		waiting[to]++
	}
	placed := make([]bool, n)
	var ready []int
	isNode := func(i int) bool { return index[g.Nodes[i].ID] == i } // not a duplicate declaration
	if s := g.StartNode(); s != nil && waiting[index[s.ID]] == 0 {
		ready = append(ready, index[s.ID])
	}
	for i := range n {
		if isNode(i) && waiting[i] == 0 && (len(ready) == 0 || ready[0] != i) {
			ready = append(ready, i)
		}
	}
	place := func(i int) {
		placed[i] = true
		for _, k := range out[i] {
			to := index[edges[k].To]
			near[to] = true
			if waiting[to]--; waiting[to] == 0 && !placed[to] {
				ready = append(ready, to)
			}
		}
	}
	for left := countNodes(n, isNode); left > 0; left-- {
		if len(ready) == 0 {
			i := stuckPick(n, isNode, placed, waiting, near)
			for _, k := range in[i] {
				if !placed[index[edges[k].From]] {
					back[k] = true
				}
			}
			waiting[i] = 0
			ready = append(ready, i)
		}
		i := ready[0]
		ready = ready[1:]
		place(i)
	}
	return back
}

func countNodes(n int, isNode func(int) bool) int {
	c := 0
	for i := range n {
		if isNode(i) {
			c++
		}
	}
	return c
}

// stuckPick chooses the node to place when every node left waits: the
// fewest edges waited on, then one next to the placed nodes, then the first
// declared.
func stuckPick(n int, isNode func(int) bool, placed []bool, waiting []int, near []bool) int {
	best := -1
	for i := range n {
		if placed[i] || !isNode(i) {
			continue
		}
		if best < 0 || waiting[i] < waiting[best] || (waiting[i] == waiting[best] && near[i] && !near[best]) {
			best = i
		}
	}
	return best
}

// layoutCost estimates how many nodes dot works with: the pipeline's nodes
// and the virtual ones it chains along every edge that spans several ranks
// (ranks doubled when edges carry labels, as dot does), from a longest-path
// ranking of the edges that are not loops.
func layoutCost(in *graphvizInput) int {
	n := len(in.g.Nodes)
	rank := make([]int, n)
	indeg := make([]int, n)
	out := make([][]int, n)
	labels := false
	for k, e := range in.edges {
		from, to := in.index[e.From], in.index[e.To]
		labels = labels || in.captions[k] != ""
		if in.back[k] || from == to {
			continue
		}
		out[from] = append(out[from], to)
		indeg[to]++
	}
	var queue []int
	for i := range n {
		if indeg[i] == 0 {
			queue = append(queue, i)
		}
	}
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		for _, to := range out[i] {
			rank[to] = max(rank[to], rank[i]+1)
			if indeg[to]--; indeg[to] == 0 {
				queue = append(queue, to)
			}
		}
	}
	scale := 1
	if labels {
		scale = 2
	}
	cost := n
	for _, e := range in.edges {
		span := rank[in.index[e.To]] - rank[in.index[e.From]]
		cost += max(1, span, -span) * scale
	}
	return cost
}
