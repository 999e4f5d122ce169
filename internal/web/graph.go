package web

import (
	"container/list"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/frontend"
	"nanohost/internal/pipeline/render"
	"nanohost/internal/runs"
)

// graphCache keeps parsed and laid-out pipelines by their source: a run's
// source never changes, runs of one stored pipeline share theirs, and
// parsing or laying out on every graph refresh would be waste. Laying out
// once per source matters beyond speed: go-graphviz keeps the memory of
// every layout's input and output in its wasm instance for the life of the
// process (about 80 KB for the F0–F6 circuit), so a host's growth is bounded
// by the distinct pipelines its people look at, not by their page loads.
type graphCache struct {
	mu    sync.Mutex
	max   int
	order *list.List
	items map[string]*list.Element
}

type graphEntry struct {
	key string // sourceKey
	g   *pipeline.Graph
	err error

	// The layout is made on first use: a page of runs never needs it.
	layoutOnce sync.Once
	layout     *render.Layout
	layoutErr  error
}

func newGraphCache(max int) *graphCache {
	return &graphCache{max: max, order: list.New(), items: map[string]*list.Element{}}
}

// graphOf returns the run's parsed pipeline (transforms applied, as the
// engine ran it). run must carry its SourceDOT (GetRun does).
func (c *graphCache) graphOf(run runs.Run) (*pipeline.Graph, error) {
	ge := c.entry(run)
	return ge.g, ge.err
}

// layoutOf returns the run's pipeline laid out by Graphviz, made once per
// source: a run's graph never changes, only its colours do, so the nodes
// stay put while the run moves and a refresh costs no layout.
func (c *graphCache) layoutOf(run runs.Run) (*render.Layout, error) {
	ge := c.entry(run)
	if ge.err != nil {
		return nil, ge.err
	}
	ge.layoutOnce.Do(func() { ge.layout, ge.layoutErr = render.Lay(ge.g) })
	return ge.layout, ge.layoutErr
}

// sourceKey names a pipeline source: what the run's graph is parsed from.
func sourceKey(run runs.Run) string {
	sum := sha256.Sum256([]byte(run.FileName + "\x00" + run.SourceDOT))
	return string(sum[:])
}

func (c *graphCache) entry(run runs.Run) *graphEntry {
	key := sourceKey(run)
	c.mu.Lock()
	if el, ok := c.items[key]; ok {
		c.order.MoveToFront(el)
		ge := el.Value.(*graphEntry)
		c.mu.Unlock()
		return ge
	}
	c.mu.Unlock()
	g, err := frontend.Parse(nonEmpty(run.FileName, "pipeline.dot"), []byte(run.SourceDOT), frontend.Options{})
	if err != nil {
		err = fmt.Errorf("the run's pipeline source does not parse: %w", err)
	} else {
		g.Reindex() // build the lookup indexes now: requests share the graph
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		return el.Value.(*graphEntry) // another request parsed it first
	}
	ge := &graphEntry{key: key, g: g, err: err}
	c.items[key] = c.order.PushFront(ge)
	for c.order.Len() > c.max {
		last := c.order.Back()
		delete(c.items, last.Value.(*graphEntry).key)
		c.order.Remove(last)
	}
	return ge
}

// runSVG paints the run's graph with its nodes coloured by state and the
// edges it took, and marks each visited node with its visits and timing
// (the page draws those as badges). Nodes the run has not reached are
// pending.
func runSVG(l *render.Layout, g *pipeline.Graph, v *runView) []byte {
	look := render.Look{States: make(map[string]string, len(g.Nodes)), Taken: make(map[render.EdgeKey]bool, len(v.Taken))}
	for _, n := range g.Nodes {
		look.States[n.ID] = render.StatePending
	}
	for id, st := range v.States {
		look.States[id] = st
	}
	for e := range v.Taken {
		look.Taken[render.EdgeKey{From: e.From, To: e.To}] = true
	}
	return markNodes(l.SVG(look), marksOf(g, v))
}

var xmlUnescaper = strings.NewReplacer("&lt;", "<", "&gt;", ">", "&quot;", `"`, "&#39;", "'", "&amp;", "&")

func unescapeXML(s string) string { return xmlUnescaper.Replace(s) }

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// graphSVG is GET /pipelines/{id}/graph: the pipeline drawn with each
// node's state and the path taken so far.
func (s *Server) graphSVG(w http.ResponseWriter, r *http.Request) {
	run, ok := s.loadRun(w, r)
	if !ok {
		return
	}
	g, err := s.graphs.graphOf(run)
	if err != nil {
		s.internalError(w, "parse the run's pipeline", err)
		return
	}
	l, err := s.graphs.layoutOf(run)
	if errors.Is(err, render.ErrTooBig) {
		writeError(w, http.StatusUnprocessableEntity, err.Error(), "follow the run's events or its timeline instead")
		return
	} else if err != nil {
		s.internalError(w, "lay out the run's pipeline", err)
		return
	}
	v, err := s.viewOf(r.Context(), run)
	if err != nil {
		s.internalError(w, "read events", err)
		return
	}
	w.Header().Set("Content-Type", "image/svg+xml")
	w.Header().Set("X-Last-Seq", fmt.Sprint(v.LastSeq))
	_, _ = w.Write(runSVG(l, g, v))
}
