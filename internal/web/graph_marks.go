package web

import (
	"bytes"
	"fmt"
	"html"
	"regexp"
	"strings"
	"time"

	"nanohost/internal/pipeline"
)

// nodeMarks is what the graph says about a node besides its colour: how
// often it ran, its attempt and how long its latest visit took. The page's
// script draws them as badges on the node (it knows where the node is
// drawn, whatever laid the graph out); the <title> says them on hover.
type nodeMarks struct {
	Visits, Attempt, MaxAttempts int
	Last                         string // the latest finished visit's duration
}

func (m nodeMarks) attrs() string {
	var b strings.Builder
	fmt.Fprintf(&b, ` data-visits="%d"`, m.Visits)
	if m.Attempt > 1 || m.MaxAttempts > 1 {
		fmt.Fprintf(&b, ` data-attempt="%d" data-max-attempts="%d"`, m.Attempt, m.MaxAttempts)
	}
	if m.Last != "" {
		fmt.Fprintf(&b, ` data-last="%s"`, html.EscapeString(m.Last))
	}
	return b.String()
}

// text is the marks in words: "3 visits · attempt 2 of 3 · last took 12s".
func (m nodeMarks) text() string {
	var parts []string
	if m.Visits > 1 {
		parts = append(parts, fmt.Sprintf("%d visits", m.Visits))
	}
	if m.Attempt > 1 {
		a := fmt.Sprintf("attempt %d", m.Attempt)
		if m.MaxAttempts > 0 {
			a += fmt.Sprintf(" of %d", m.MaxAttempts)
		}
		parts = append(parts, a)
	}
	if m.Last != "" {
		parts = append(parts, "last took "+m.Last)
	}
	return strings.Join(parts, " · ")
}

// marksOf is each visited node's marks. The start and exit nodes do no
// work: how long they took is noise.
func marksOf(g *pipeline.Graph, v *runView) map[string]nodeMarks {
	out := make(map[string]nodeMarks, len(v.Visits))
	for id, n := range v.Visits {
		t := v.Timings[id]
		m := nodeMarks{Visits: n, Attempt: t.Attempt, MaxAttempts: t.MaxAttempts}
		node := g.Node(id)
		if !t.FinishedAt.IsZero() && node != nil && !node.IsStart() && !node.IsExit() {
			m.Last = visitDuration(t.Duration)
		}
		out[id] = m
	}
	return out
}

// visitDuration is how long a visit took; one that finished at once took
// at least a millisecond, not "—".
func visitDuration(d time.Duration) string { return durationText(max(d, time.Millisecond)) }

var (
	svgGroupTag = regexp.MustCompile(`<g\s[^>]*>`)
	svgAttr     = regexp.MustCompile(`([\w:-]+)="([^"]*)"`)
)

// markNodes writes each visited node's marks into its group of the SVG
// (<g class="node …" id="node-ID">) as data- attributes, and into its
// <title>.
func markNodes(svg []byte, marks map[string]nodeMarks) []byte {
	if len(marks) == 0 {
		return svg
	}
	var out bytes.Buffer
	out.Grow(len(svg) + 96*len(marks))
	rest := svg
	for {
		loc := svgGroupTag.FindIndex(rest)
		if loc == nil {
			out.Write(rest)
			return out.Bytes()
		}
		tag := rest[loc[0]:loc[1]]
		out.Write(rest[:loc[0]])
		rest = rest[loc[1]:]
		m, ok := marks[nodeIDOf(tag)]
		if !ok {
			out.Write(tag)
			continue
		}
		out.Write(tag[:len(tag)-1])
		out.WriteString(m.attrs())
		out.WriteByte('>')
		rest = extendTitle(&out, rest, m.text())
	}
}

// nodeIDOf is the node id of a node group's tag, or "".
func nodeIDOf(tag []byte) string {
	var class, id string
	for _, a := range svgAttr.FindAllSubmatch(tag, -1) {
		switch string(a[1]) {
		case "class":
			class = string(a[2])
		case "id":
			id = unescapeXML(string(a[2]))
		}
	}
	if !strings.Contains(" "+class+" ", " node ") {
		return ""
	}
	return strings.TrimPrefix(id, "node-")
}

// extendTitle copies the group's leading <title> with more appended ("plan
// — 3 visits · last took 12s") and returns what follows it.
func extendTitle(out *bytes.Buffer, rest []byte, more string) []byte {
	trimmed := bytes.TrimLeft(rest, " \n")
	if more == "" || !bytes.HasPrefix(trimmed, []byte("<title>")) {
		return rest
	}
	end := bytes.Index(trimmed, []byte("</title>"))
	if end < 0 {
		return rest
	}
	out.Write(rest[:len(rest)-len(trimmed)])
	out.Write(trimmed[:end])
	out.WriteString(" — " + html.EscapeString(more))
	return trimmed[end:]
}
