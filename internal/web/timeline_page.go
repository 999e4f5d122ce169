package web

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"nanohost/internal/runlog"
)

// timelinePage is the run's timeline as the page draws it: a row per node
// (in the order they first ran), a bar per visit, positions in percent of
// the row's width so the same markup fits a phone and a desktop.
type timelinePage struct {
	Rows []timelineRow
	// Marks are the run's interruptions and resumptions; Gaps the idle
	// stretches (the host was down) drawn narrower than their length.
	Marks []timelineMark
	Gaps  []timelineGap
	// From and To label the axis: start and end clocks, To with the
	// run's length so far.
	From, To string
}

type timelineRow struct {
	Node, Name string
	Visits     int
	Bars       []timelineBar
	// Last is the latest visit's duration (or "running").
	Last string
}

type timelineBar struct {
	X, W    string // percent
	Outcome string
	// Title says what the bar is: "build — visit 2 · attempt 2 of 3 ·
	// 12s · success".
	Title   string
	Waits   []timelineSeg
	Retries []string // x of each retry, percent
}

type timelineSeg struct{ X, W string }

type timelineMark struct {
	X, Kind, Title string
}

type timelineGap struct {
	X, W, Center, Text string
}

// Idle stretches (no visit running: the host was down, the run queued)
// longer than minGap take gapWidth percent of the axis, not their length.
const (
	minGap   = time.Minute
	gapWidth = 4.0
	// minBar keeps an instant visit visible (percent).
	minBar = 0.6
)

// timeline lays out v's visits; now ends the visits still running.
func timeline(v *runView, now time.Time) timelinePage {
	var page timelinePage
	if len(v.Spans) == 0 {
		return page
	}
	first, last := v.Spans[0].Start, now
	if v.Ended() || len(v.open) == 0 {
		last = first
		for _, sp := range v.Spans {
			last = latest(last, spanEnd(sp, now))
		}
	}
	for _, st := range v.Stops {
		last = latest(last, st.At)
	}
	axis := newTimeAxis(v.Spans, first, last, now)
	rows := map[string]int{}
	for _, sp := range v.Spans {
		i, ok := rows[sp.Node]
		if !ok {
			i = len(page.Rows)
			rows[sp.Node] = i
			page.Rows = append(page.Rows, timelineRow{Node: sp.Node, Name: runlog.StageName(sp.Label, sp.Node, "")})
		}
		row := &page.Rows[i]
		row.Visits++
		row.Bars = append(row.Bars, axis.bar(sp, now))
		row.Last = visitDuration(spanEnd(sp, now).Sub(sp.Start))
		if sp.End.IsZero() {
			row.Last = sp.Outcome
		}
	}
	for _, st := range v.Stops {
		page.Marks = append(page.Marks, timelineMark{X: pct(axis.x(st.At)), Kind: st.Kind,
			Title: fmt.Sprintf("%s at %s", st.Kind, clock(st.At))})
	}
	for _, g := range axis.gaps() {
		page.Gaps = append(page.Gaps, timelineGap{X: pct(g.x), W: pct(g.w), Center: pct(g.x + g.w/2), Text: "≈ " + durationText(g.d) + " idle"})
	}
	page.From = clock(first)
	page.To = clock(last) + " · " + durationText(last.Sub(first))
	return page
}

func (a timeAxis) bar(sp visitSpan, now time.Time) timelineBar {
	end := spanEnd(sp, now)
	x0, x1 := a.x(sp.Start), a.x(end)
	b := timelineBar{X: pct(x0), W: pct(max(x1-x0, minBar)), Outcome: sp.Outcome}
	for _, w := range sp.Waits {
		wx0, wx1 := a.x(w.Start), a.x(cmpTime(w.End, end))
		b.Waits = append(b.Waits, timelineSeg{X: pct(wx0), W: pct(max(wx1-wx0, minBar/2))})
	}
	for _, r := range sp.Retries {
		b.Retries = append(b.Retries, pct(a.x(r)))
	}
	facts := []string{fmt.Sprintf("visit %d", sp.Visit)}
	if sp.Attempts > 1 {
		facts = append(facts, fmt.Sprintf("attempt %d", sp.Attempts))
	}
	facts = append(facts, "started "+clock(sp.Start), visitDuration(end.Sub(sp.Start)), sp.Outcome)
	b.Title = runlog.StageName(sp.Label, sp.Node, sp.Branch) + " — " + strings.Join(facts, " · ")
	return b
}

func spanEnd(sp visitSpan, now time.Time) time.Time { return cmpTime(sp.End, now) }

// cmpTime is t, or def when t is zero.
func cmpTime(t, def time.Time) time.Time {
	if t.IsZero() {
		return def
	}
	return t
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func clock(t time.Time) string { return t.UTC().Format("15:04:05") }

func pct(f float64) string { return fmt.Sprintf("%.2f%%", f) }

// timeAxis maps a time to a position (0–100) along the timeline: linear,
// except that long idle stretches are squeezed to gapWidth.
type timeAxis struct {
	pieces []axisPiece
}

// axisPiece maps [from, to) onto [x, x+w).
type axisPiece struct {
	from, to time.Time
	x, w     float64
	idle     bool
}

type axisGap struct {
	x, w float64
	d    time.Duration
}

func newTimeAxis(spans []visitSpan, first, last time.Time, now time.Time) timeAxis {
	// The busy stretches: the union of the visits.
	type stretch struct{ from, to time.Time }
	var busy []stretch
	sorted := slices.Clone(spans)
	slices.SortFunc(sorted, func(a, b visitSpan) int { return a.Start.Compare(b.Start) })
	for _, sp := range sorted {
		end := spanEnd(sp, now)
		if n := len(busy); n > 0 && !sp.Start.After(busy[n-1].to) {
			busy[n-1].to = latest(busy[n-1].to, end)
			continue
		}
		busy = append(busy, stretch{sp.Start, end})
	}
	var pieces []axisPiece
	at := first
	add := func(to time.Time, idle bool) {
		if to.After(at) {
			pieces = append(pieces, axisPiece{from: at, to: to, idle: idle && to.Sub(at) > minGap})
			at = to
		}
	}
	for _, b := range busy {
		add(b.from, true)
		add(b.to, false)
	}
	add(last, true)
	// Idle pieces take gapWidth each; the rest share what is left by length.
	var gaps int
	var rest time.Duration
	for _, p := range pieces {
		if p.idle {
			gaps++
		} else {
			rest += p.to.Sub(p.from)
		}
	}
	room := 100 - gapWidth*float64(gaps)
	x := 0.0
	for i := range pieces {
		p := &pieces[i]
		p.x = x
		switch {
		case p.idle:
			p.w = gapWidth
		case rest > 0:
			p.w = room * float64(p.to.Sub(p.from)) / float64(rest)
		}
		x += p.w
	}
	return timeAxis{pieces: pieces}
}

// x is t's position, 0–100.
func (a timeAxis) x(t time.Time) float64 {
	for _, p := range a.pieces {
		if t.Before(p.to) {
			if !t.After(p.from) {
				return p.x
			}
			return p.x + p.w*float64(t.Sub(p.from))/float64(p.to.Sub(p.from))
		}
	}
	return 100
}

func (a timeAxis) gaps() []axisGap {
	var out []axisGap
	for _, p := range a.pieces {
		if p.idle {
			out = append(out, axisGap{x: p.x, w: p.w, d: p.to.Sub(p.from)})
		}
	}
	return out
}

// runTimeline is GET /runs/{id}/timeline: the run page's timeline alone,
// for the page to refresh it as the run goes on.
func (s *Server) runTimeline(w http.ResponseWriter, r *http.Request) {
	run, ok := s.loadRun(w, r)
	if !ok {
		return
	}
	v, err := s.viewOf(r.Context(), run)
	if err != nil {
		s.internalError(w, "read events", err)
		return
	}
	s.renderFragment(w, s.pages.run, "timeline", timeline(v, s.opts.Now()))
}
