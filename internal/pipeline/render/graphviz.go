package render

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/goccy/go-graphviz"
)

// Graphviz runs the dot layout of Graphviz's own C code, compiled to
// WebAssembly and embedded by go-graphviz (run by wazero: no cgo, no system
// package). The module is compiled and instantiated once per process, on
// the first layout (go-graphviz does it in its package init, which every
// command paid at start, --help too; our fork in third_party/go-graphviz
// defers it), and every call goes to that one instance: a wasm instance has
// one linear memory and one stack, so two goroutines in it at once would
// corrupt each other. engineMu serialises every call.
var (
	engineMu sync.Mutex
	engine   *graphviz.Graphviz
)

// GraphvizVersion is the version of the Graphviz compiled in (go-graphviz
// v0.2.10 embeds 12.1.2); the SVG names it.
const GraphvizVersion = "12.1.2"

// Limits of what SVG lays out. dot's crossing minimisation and ranking grow
// much faster than the graph, and every other render waits for the one in
// the wasm instance (which cannot be interrupted): a 1,000-node chain takes
// about a second here, 3,000 nodes 15–30 s, and 300 nodes with 1,500
// edges between random stages did not finish in 14 minutes. What bounds
// the time is the work estimated by layoutCost (nodes plus the virtual
// nodes of edges spanning ranks): at 4,000 the worst random graphs took
// 2 s, at 4,800 5 s, at 8,700 24 s. The public corpus's largest pipeline
// costs 694, the F0–F6 circuit 174.
const (
	MaxLayoutNodes = 1000
	MaxLayoutEdges = 3000
	MaxLayoutCost  = 4000
)

// layoutJSON runs dot over src (Graphviz DOT written by graphvizInput) and
// returns Graphviz's JSON output: positions and xdot drawing operations.
func layoutJSON(src []byte) (out *gvGraph, err error) {
	engineMu.Lock()
	defer engineMu.Unlock()
	defer func() {
		// go-graphviz panics when the wasm side traps; a bad drawing must
		// not take the host down.
		if p := recover(); p != nil {
			err = fmt.Errorf("graphviz failed: %v", p)
		}
	}()
	ctx := context.Background()
	if engine == nil {
		dir, err := graphvizCacheDir()
		if err != nil {
			dir = "" // compile in memory rather than trust a directory others can reach
		}
		graphviz.SetCompilationCacheDir(dir)
		gv, err := graphviz.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("start graphviz: %w", err)
		}
		engine = gv
	}
	graph, err := graphviz.ParseBytes(src)
	if err != nil {
		return nil, fmt.Errorf("graphviz rejected the layout input: %w", err)
	}
	defer graph.Close()
	var buf bytes.Buffer
	if err := engine.Render(ctx, graph, graphviz.Format("json"), &buf); err != nil {
		return nil, fmt.Errorf("graphviz dot layout: %w", err)
	}
	out = new(gvGraph)
	if err := json.Unmarshal(buf.Bytes(), out); err != nil {
		return nil, fmt.Errorf("read graphviz's layout: %w", err)
	}
	return out, nil
}

// gvGraph is the part of Graphviz's JSON output (-Tjson) the painter uses.
// Coordinates are points (1/72 in) with y growing upwards.
type gvGraph struct {
	BB      string     `json:"bb"`
	LDraw   []gvOp     `json:"_ldraw_"`
	Objects []gvObject `json:"objects"`
	Edges   []gvEdge   `json:"edges"`
}

// gvObject is a cluster or a node.
type gvObject struct {
	Name   string `json:"name"`
	GVID   int    `json:"_gvid"`
	Nodes  []int  `json:"nodes"` // set on clusters only
	Pos    string `json:"pos"`
	Width  string `json:"width"`  // inches
	Height string `json:"height"` // inches
	Draw   []gvOp `json:"_draw_"`
	LDraw  []gvOp `json:"_ldraw_"`
}

type gvEdge struct {
	ID    string `json:"id"`
	Tail  int    `json:"tail"`
	Head  int    `json:"head"`
	Draw  []gvOp `json:"_draw_"`
	LDraw []gvOp `json:"_ldraw_"`
	HDraw []gvOp `json:"_hdraw_"`
	TDraw []gvOp `json:"_tdraw_"`
	Dir   string `json:"dir"`
}

// gvOp is one xdot drawing operation: p/P polygon (P filled), L polyline,
// b/B Bézier, e/E ellipse (rect is centre and radii), T text at its
// baseline, F font, c/C pen and fill colour, S style.
type gvOp struct {
	Op     string       `json:"op"`
	Points [][2]float64 `json:"points"`
	Rect   [4]float64   `json:"rect"`
	Pt     [2]float64   `json:"pt"`
	Align  string       `json:"align"`
	Text   string       `json:"text"`
	Width  float64      `json:"width"` // of a text, as Graphviz measured it
	Size   float64      `json:"size"`
	Face   string       `json:"face"`
}
