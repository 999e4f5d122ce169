package fidelity

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Stage is one completed stage as the preamble reports it.
type Stage struct {
	NodeID        string        `json:"node_id"`
	Label         string        `json:"label,omitempty"`
	Persona       string        `json:"persona,omitempty"` // who worked it (its persona's title)
	Status        string        `json:"status"`
	Notes         string        `json:"notes,omitempty"`
	FailureReason string        `json:"failure_reason,omitempty"`
	Response      string        `json:"response,omitempty"`
	Duration      time.Duration `json:"duration_ns,omitempty"`
	Attempts      int           `json:"attempts,omitempty"`
}

// History is what a run has done so far, stages oldest first.
type History struct {
	RunID   string
	Goal    string
	Stages  []Stage
	Context map[string]any
	// Artifacts are the typed outputs of earlier stages, where the agent
	// can read them whole.
	Artifacts []Artifact
}

// Artifact is a stage's typed output, by node id and path.
type Artifact struct {
	Node string
	Path string
}

// style is how much a mode says. Budgets are in bytes at about four per
// token, which over-counts for non-ASCII text and so errs on the short side.
type style struct {
	budget      int
	counts      bool // a line counting stages by status
	detail      int  // bytes of notes and failure reason per stage; 0 = status only
	response    int  // bytes of response excerpt per older stage
	latestReply int  // bytes of response excerpt for the most recent stage
	timing      bool // durations and attempts
	valueMax    int  // context values longer than this are…
	cutValues   bool // …cut to valueMax (true) or left out (false)
	ctxShare    int  // context gets at most 1/ctxShare of what the header leaves
}

const bytesPerToken = 4

var styles = map[Mode]style{
	// compact: structured bullets; ~1000 tokens so a long run cannot bloat it.
	Compact:       {budget: 1000 * bytesPerToken, detail: 160, valueMax: 200, ctxShare: 3},
	SummaryLow:    {budget: 600 * bytesPerToken, counts: true, valueMax: 80, ctxShare: 4},
	SummaryMedium: {budget: 1500 * bytesPerToken, counts: true, detail: 300, latestReply: 600, timing: true, valueMax: 200, cutValues: true, ctxShare: 3},
	SummaryHigh:   {budget: 3000 * bytesPerToken, counts: true, detail: 600, response: 400, latestReply: 1500, timing: true, valueMax: 400, cutValues: true, ctxShare: 3},
}

// truncateGoalMax caps the goal in truncate mode, whose budget is "minimal".
const truncateGoalMax = 1200

// Budget is the most bytes Preamble returns for the mode (0 for full).
func Budget(m Mode) int {
	if m == Truncate {
		return truncateGoalMax + 200
	}
	return styles[m].budget
}

// Preamble renders what a fresh session is told about the run so far:
// nothing for full (the session remembers), the goal and run id for
// truncate, and for compact and the summaries a header, the stages (the
// newest first to get space, shown oldest first) and the context values,
// within the mode's budget. An invalid mode is treated as compact. The
// output depends only on its input.
func Preamble(mode Mode, h History) string {
	switch mode {
	case Full:
		return ""
	case Truncate:
		return header(h, truncateGoalMax, false)
	}
	st, ok := styles[mode]
	if !ok {
		mode, st = Compact, styles[Compact]
	}
	return render(mode, st, h)
}

func header(h History, goalMax int, counts bool) string {
	var b strings.Builder
	b.WriteString("Pipeline context")
	if h.RunID != "" {
		b.WriteString(" (run " + clip(oneLine(h.RunID), 100) + ")")
	}
	b.WriteString(":\n")
	if h.Goal != "" {
		b.WriteString("Goal: " + clip(oneLine(h.Goal), goalMax) + "\n")
	}
	if counts {
		// The line is short unless statuses are odd; keep it bounded anyway.
		if line := countLine(h.Stages); line != "" {
			b.WriteString(clip(line, goalMax/2) + "\n")
		}
	}
	return b.String()
}

// Reserved room for the section headings and "… omitted" markers, so the
// parts chosen below always fit.
const (
	stagesHeading  = "\nCompleted stages (oldest first):\n"
	contextHeading = "\nContext:\n"
	markerRoom     = 64
)

func render(mode Mode, st style, h History) string {
	head := header(h, st.budget/4, st.counts) + artifactSection(h.Artifacts, st.budget/4)
	room := st.budget - len(head) - len(stagesHeading) - markerRoom
	if len(h.Stages) == 0 {
		head += "No stages have completed yet.\n"
		room -= len("No stages have completed yet.\n")
	}

	// The most recent stage always appears, cut down if it must be.
	var latest string
	if n := len(h.Stages); n > 0 {
		latest = stageBlock(h.Stages[n-1], st, st.latestReply)
		if len(latest) > room {
			latest = clip(stageLine(h.Stages[n-1], st), room-1) + "\n"
		}
		room -= len(latest)
	}

	ctx := contextSection(h.Context, st, (room-len(contextHeading)-markerRoom)/st.ctxShare)
	room -= len(ctx)

	// Older stages, newest first, while they fit; they must be a run of
	// consecutive stages so "N earlier stages omitted" is true.
	var older []string
	for i := len(h.Stages) - 2; i >= 0; i-- {
		block := stageBlock(h.Stages[i], st, st.response)
		if len(block) > room {
			break
		}
		room -= len(block)
		older = append(older, block)
	}
	slices.Reverse(older)

	var b strings.Builder
	b.Grow(st.budget - room + len(stagesHeading) + 2*markerRoom)
	b.WriteString(head)
	if len(h.Stages) > 0 {
		b.WriteString(stagesHeading)
		if omitted := len(h.Stages) - 1 - len(older); omitted > 0 {
			fmt.Fprintf(&b, "- … %d earlier stage%s omitted\n", omitted, plural(omitted))
		}
		for _, blk := range older {
			b.WriteString(blk)
		}
		b.WriteString(latest)
	}
	b.WriteString(ctx)
	return clip(strings.TrimRight(b.String(), "\n"), st.budget)
}

// stageLine is a stage's one-line summary: id, label, status, timing.
func stageLine(s Stage, st style) string {
	var b strings.Builder
	writeStageLine(&b, s, st)
	return b.String()
}

func writeStageLine(b *strings.Builder, s Stage, st style) {
	b.WriteString("- ")
	b.WriteString(oneLine(s.NodeID))
	if s.Label != "" && s.Label != s.NodeID {
		b.WriteString(" (")
		b.WriteString(clip(oneLine(s.Label), 80))
		b.WriteString(")")
	}
	if s.Persona != "" {
		b.WriteString(" by " + clip(oneLine(s.Persona), 40))
	}
	status := s.Status
	if status == "" {
		status = "unknown"
	}
	b.WriteString(": ")
	b.WriteString(status)
	if st.timing && (s.Duration > 0 || s.Attempts > 1) {
		var parts []string
		if s.Duration > 0 {
			parts = append(parts, roundDuration(s.Duration).String())
		}
		if s.Attempts > 1 {
			parts = append(parts, fmt.Sprintf("%d attempts", s.Attempts))
		}
		b.WriteString(" [" + strings.Join(parts, ", ") + "]")
	}
}

// stageBlock is the stage line plus its detail lines, newline-terminated.
// It is built once per stage and request, so it writes into one buffer.
func stageBlock(s Stage, st style, reply int) string {
	var b strings.Builder
	b.Grow(64 + len(s.NodeID) + len(s.Label) + min(len(s.FailureReason), max(st.detail, 80)) + min(len(s.Notes), st.detail) + min(len(s.Response), reply))
	writeStageLine(&b, s, st)
	b.WriteByte('\n')
	detail := st.detail
	if detail == 0 && s.FailureReason != "" {
		// Even the briefest mode says why something failed.
		detail = 80
	}
	if detail > 0 && s.FailureReason != "" {
		writeDetail(&b, "  failure: ", s.FailureReason, detail)
	}
	if st.detail > 0 && s.Notes != "" {
		writeDetail(&b, "  notes: ", s.Notes, st.detail)
	}
	if reply > 0 && s.Response != "" {
		writeDetail(&b, "  response: ", s.Response, reply)
	}
	return b.String()
}

func writeDetail(b *strings.Builder, label, text string, max int) {
	b.WriteString(label)
	b.WriteString(clip(oneLine(text), max))
	b.WriteByte('\n')
}

func countLine(stages []Stage) string {
	if len(stages) == 0 {
		return ""
	}
	counts := map[string]int{}
	for _, s := range stages {
		counts[s.Status]++
	}
	var parts []string
	for _, status := range []string{"success", "partial_success", "retry", "fail", "skipped"} {
		if n := counts[status]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, status))
			delete(counts, status)
		}
	}
	rest := make([]string, 0, len(counts))
	for status := range counts {
		rest = append(rest, status)
	}
	sort.Strings(rest)
	for _, status := range rest {
		name := status
		if name == "" {
			name = "unknown"
		}
		parts = append(parts, fmt.Sprintf("%d %s", counts[status], clip(oneLine(name), 40)))
	}
	return fmt.Sprintf("Progress: %d stage%s run (%s)", len(stages), plural(len(stages)), strings.Join(parts, ", "))
}

// hiddenContext are keys the preamble leaves out: engine bookkeeping, and
// the goal, which the header already states.
func hiddenContext(key string) bool {
	return strings.HasPrefix(key, "internal.") || key == "graph.goal" || key == "current_node"
}

// contextSection lists context values by key within room bytes.
func contextSection(ctx map[string]any, st style, room int) string {
	keys := make([]string, 0, len(ctx))
	for k := range ctx {
		if !hiddenContext(k) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 || room <= 0 {
		return ""
	}
	sort.Strings(keys)
	var lines []string
	used, omitted := 0, 0
	for _, k := range keys {
		v := formatValue(ctx[k])
		if len(v) > st.valueMax {
			if !st.cutValues {
				omitted++
				continue
			}
			v = clip(v, st.valueMax)
		}
		line := "- " + clip(oneLine(k), 100) + ": " + v + "\n"
		if used+len(line) > room {
			omitted++
			continue
		}
		used += len(line)
		lines = append(lines, line)
	}
	if len(lines) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(contextHeading)
	for _, l := range lines {
		b.WriteString(l)
	}
	if omitted > 0 {
		fmt.Fprintf(&b, "- … %d more value%s omitted (long or over budget)\n", omitted, plural(omitted))
	}
	return b.String()
}

func formatValue(v any) string {
	if s, ok := v.(string); ok {
		return oneLine(s)
	}
	data, err := json.Marshal(v) // sorts map keys: deterministic
	if err != nil {
		return oneLine(fmt.Sprint(v))
	}
	return string(data)
}

// oneLine collapses runs of whitespace (newlines included) to one space
// and trims it. Most text is one line already: that is checked first,
// without allocating.
func oneLine(s string) string {
	if isOneLine(s) {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}

// isOneLine reports whether oneLine would return s unchanged: no leading or
// trailing space, no whitespace but single spaces.
func isOneLine(s string) bool {
	space := true // a leading space is not allowed
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRuneInString(s[i:])
			if unicode.IsSpace(r) {
				return false
			}
			space = false
			i += n
			continue
		}
		switch c {
		case ' ':
			if space {
				return false
			}
			space = true
		case '\t', '\n', '\v', '\f', '\r':
			return false
		default:
			space = false
		}
		i++
	}
	return !space || s == ""
}

// clip cuts s to at most max bytes on a rune boundary, marking the cut with "…".
func clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	const ellipsis = "…"
	if max < len(ellipsis) {
		return ""
	}
	cut := max - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}

func roundDuration(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(time.Second)
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// artifactSection lists the earlier stages' artifacts (at most room bytes,
// the newest kept): an agent reads the previous step's artifact rather
// than a summary of it.
func artifactSection(as []Artifact, room int) string {
	if len(as) == 0 {
		return ""
	}
	const heading = "\nArtifacts of earlier stages (their typed outputs as JSON: read them for the details):\n"
	room -= len(heading) + markerRoom
	var lines []string
	for i := len(as) - 1; i >= 0; i-- {
		line := "- " + clip(oneLine(as[i].Node), 80) + ": " + clip(oneLine(as[i].Path), 200) + "\n"
		if len(line) > room {
			break
		}
		room -= len(line)
		lines = append(lines, line)
	}
	slices.Reverse(lines)
	var b strings.Builder
	b.WriteString(heading)
	if omitted := len(as) - len(lines); omitted > 0 {
		fmt.Fprintf(&b, "- … %d more\n", omitted)
	}
	for _, l := range lines {
		b.WriteString(l)
	}
	return b.String()
}
