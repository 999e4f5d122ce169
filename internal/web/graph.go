package web

import (
	"bytes"
	"container/list"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/frontend"
	"nanohost/internal/pipeline/render"
	"nanohost/internal/runs"
)

// graphCache keeps parsed pipelines by run id: a run's source never
// changes, and parsing on every graph refresh would be waste.
type graphCache struct {
	mu    sync.Mutex
	max   int
	order *list.List
	items map[string]*list.Element
}

type graphEntry struct {
	runID string
	g     *pipeline.Graph
	err   error
}

func newGraphCache(max int) *graphCache {
	return &graphCache{max: max, order: list.New(), items: map[string]*list.Element{}}
}

// graphOf returns the run's parsed pipeline (transforms applied, as the
// engine ran it). run must carry its SourceDOT (GetRun does).
func (c *graphCache) graphOf(run runs.Run) (*pipeline.Graph, error) {
	c.mu.Lock()
	if el, ok := c.items[run.ID]; ok {
		c.order.MoveToFront(el)
		ge := el.Value.(*graphEntry)
		c.mu.Unlock()
		return ge.g, ge.err
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
	if _, ok := c.items[run.ID]; !ok {
		c.items[run.ID] = c.order.PushFront(&graphEntry{runID: run.ID, g: g, err: err})
		for c.order.Len() > c.max {
			last := c.order.Back()
			delete(c.items, last.Value.(*graphEntry).runID)
			c.order.Remove(last)
		}
	}
	return g, err
}

// runSVG draws the run's graph with its nodes coloured by state and the
// edges it took highlighted. Nodes the run has not reached are pending.
func runSVG(g *pipeline.Graph, v *runView) []byte {
	states := make(map[string]string, len(g.Nodes))
	for _, n := range g.Nodes {
		states[n.ID] = render.StatePending
	}
	for id, st := range v.States {
		states[id] = st
	}
	return markNodes(highlightEdges(render.SVG(g, states), v.Taken), marksOf(g, v))
}

// How a taken edge is drawn: render draws every edge thin and grey; a
// taken one is thick and blue, with its own arrowhead (a marker scales with
// the stroke, so the shared one would come out huge).
const (
	edgeStroke     = `stroke="#495057" stroke-width="1.3"`
	takenStroke    = `stroke="#1c7ed6" stroke-width="3"`
	edgeMarker     = `marker-end="url(#arrow)"`
	takenMarker    = `marker-end="url(#arrow-taken)"`
	takenMarkerDef = `<marker id="arrow-taken" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="3.5" markerHeight="3.5" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#1c7ed6"/></marker></defs>`
)

// highlightEdges marks the edges the run took: their group gets the class
// "taken" and their path a thick blue stroke. render.SVG writes each edge
// as <g class="edge[ back]"><title>FROM -&gt; TO</title><path … stroke=…>.
func highlightEdges(svg []byte, taken map[edgeKey]bool) []byte {
	if len(taken) == 0 {
		return svg
	}
	var out bytes.Buffer
	out.Grow(len(svg) + 64*len(taken) + len(takenMarkerDef))
	rest := svg
	if i := bytes.Index(rest, []byte("</defs>")); i >= 0 {
		out.Write(rest[:i])
		out.WriteString(takenMarkerDef)
		rest = rest[i+len("</defs>"):]
	}
	const open = `<g class="edge`
	for {
		i := bytes.Index(rest, []byte(open))
		if i < 0 {
			out.Write(rest)
			return out.Bytes()
		}
		out.Write(rest[:i])
		rest = rest[i:]
		end := bytes.Index(rest, []byte("</g>"))
		if end < 0 {
			out.Write(rest)
			return out.Bytes()
		}
		group := rest[:end]
		if from, to, ok := edgeTitle(group); ok && taken[edgeKey{from, to}] {
			group = bytes.Replace(group, []byte(open), []byte(open+" taken"), 1)
			group = bytes.Replace(group, []byte(edgeStroke), []byte(takenStroke), 1)
			group = bytes.Replace(group, []byte(edgeMarker), []byte(takenMarker), 1)
		}
		out.Write(group)
		rest = rest[end:]
	}
}

// edgeTitle reads FROM and TO back from an edge group's <title>.
func edgeTitle(group []byte) (from, to string, ok bool) {
	_, after, found := bytes.Cut(group, []byte("<title>"))
	if !found {
		return "", "", false
	}
	title, _, found := bytes.Cut(after, []byte("</title>"))
	if !found {
		return "", "", false
	}
	from, to, ok = strings.Cut(unescapeXML(string(title)), " -> ")
	return from, to, ok
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
	v, err := s.viewOf(r.Context(), run)
	if err != nil {
		s.internalError(w, "read events", err)
		return
	}
	w.Header().Set("Content-Type", "image/svg+xml")
	w.Header().Set("X-Last-Seq", fmt.Sprint(v.LastSeq))
	_, _ = w.Write(runSVG(g, v))
}
