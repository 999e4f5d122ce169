package engine

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Verbosity filters the live log (host document: minimal, standard, verbose).
type Verbosity int

const (
	VerbosityMinimal Verbosity = iota
	VerbosityStandard
	VerbosityVerbose
)

// ParseVerbosity reads minimal, standard or verbose.
func ParseVerbosity(s string) (Verbosity, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "minimal":
		return VerbosityMinimal, nil
	case "", "standard":
		return VerbosityStandard, nil
	case "verbose":
		return VerbosityVerbose, nil
	}
	return VerbosityStandard, fmt.Errorf("unknown verbosity %q (want minimal, standard or verbose)", s)
}

// routingRules are the decisions worth showing at standard verbosity: the
// ones where something other than the graph's only path chose.
var routingRules = map[string]bool{
	"condition": true, "preferred_label": true, "suggested_next_ids": true, "fallback_any_edge": true,
	"fail_condition": true, "fail_to_conditional": true, "retry_target": true, "fallback_retry_target": true,
	"graph_retry_target": true, "graph_fallback_retry_target": true, "goal_gate_retry": true,
}

// EventVerbosity is the lowest verbosity at which e is shown.
func EventVerbosity(e Event) Verbosity {
	switch e.Type {
	case EventPipelineStarted, EventPipelineCompleted, EventPipelineFailed, EventPipelineResumed:
		return VerbosityMinimal
	case EventStageFailed:
		if e.WillRetry {
			return VerbosityStandard
		}
		return VerbosityMinimal
	case EventStageStarted, EventStageCompleted:
		if dataString(e.Data, "handler") == TypeConditional {
			return VerbosityVerbose
		}
		return VerbosityStandard
	case EventStageRetrying, EventParallelStarted, EventParallelBranchCompleted, EventParallelCompleted,
		EventInterviewStarted, EventInterviewCompleted, EventInterviewTimeout, EventWarning:
		return VerbosityStandard
	case EventDecision:
		if e.Decision != nil && routingRules[e.Decision.Rule] {
			return VerbosityStandard
		}
	}
	return VerbosityVerbose
}

// wornBy says who works a stage: " as seeker wearing recall, forge".
func wornBy(e Event) string {
	s := ""
	if e.Persona != "" {
		s += " as " + e.Persona
	}
	if len(e.Masks) > 0 {
		s += " wearing " + strings.Join(e.Masks, ", ")
	}
	return s
}

// FormatEvent renders e as a line of the live log in the host document's
// format ("  → Implement (3/5)", "  ✓ Implement — 2m 30s", …); "" when the
// event has nothing to show. Channels (terminal, Slack) share this wording.
func FormatEvent(e Event) string {
	handler := dataString(e.Data, "handler")
	name := e.Label
	if name == "" {
		name = e.NodeID
	}
	branch := ""
	if e.Branch != "" {
		branch = " [branch " + e.Branch + "]"
	}
	switch e.Type {
	case EventPipelineStarted:
		if e.Message != "" {
			return fmt.Sprintf("[Pipeline] %s: %s", name, e.Message)
		}
		return "[Pipeline] " + name
	case EventPipelineResumed:
		return fmt.Sprintf("[Pipeline] %s resumed at %s", name, e.NodeID)
	case EventPipelineCompleted:
		return "✓ Pipeline complete — " + FormatDuration(e.Duration)
	case EventPipelineFailed:
		if dataBool(e.Data, "cancelled") {
			return "✗ Pipeline cancelled — " + FormatDuration(e.Duration) + " (resumable)"
		}
		return fmt.Sprintf("✗ Pipeline failed — %s — %s", FormatDuration(e.Duration), e.Message)
	case EventStageStarted:
		if handler == TypeStart {
			return ""
		}
		if e.Index > 0 {
			return fmt.Sprintf("  → %s (%d/%d)%s%s", name, e.Index, e.Total, wornBy(e), branch)
		}
		return fmt.Sprintf("  → %s%s%s", name, wornBy(e), branch)
	case EventStageCompleted:
		if handler == TypeStart || handler == TypeExit {
			return ""
		}
		suffix := ""
		if e.Status != "" && e.Status != StatusSuccess {
			suffix = " (" + string(e.Status) + ")"
		}
		return fmt.Sprintf("  ✓ %s — %s%s%s", name, FormatDuration(e.Duration), suffix, branch)
	case EventStageFailed:
		if e.WillRetry {
			return fmt.Sprintf("  ✗ %s — %s (attempt %d/%d)%s", name, e.Message, e.Attempt, e.MaxAttempt, branch)
		}
		if e.Message == "" {
			return fmt.Sprintf("  ✗ %s — %s%s", name, FormatDuration(e.Duration), branch)
		}
		return fmt.Sprintf("  ✗ %s — %s — %s%s", name, FormatDuration(e.Duration), e.Message, branch)
	case EventStageRetrying:
		return fmt.Sprintf("  ↻ Retry: %s (%d/%d) in %s%s", name, e.Attempt, e.MaxAttempt, FormatDuration(e.Delay), branch)
	case EventDecision:
		return formatDecision(e.Decision, branch)
	case EventParallelStarted:
		return fmt.Sprintf("  ⑂ %s: %d branches", name, dataInt(e.Data, "branch_count"))
	case EventParallelBranchStarted:
		return fmt.Sprintf("  ⑂ branch %s started", e.Branch)
	case EventParallelBranchCompleted:
		mark := "✓"
		if !e.Status.IsSuccess() {
			mark = "✗"
		}
		msg := ""
		if !e.Status.IsSuccess() && e.Message != "" {
			msg = " — " + e.Message
		}
		return fmt.Sprintf("  ⑂ %s branch %s — %s%s", mark, e.Branch, FormatDuration(e.Duration), msg)
	case EventParallelCompleted:
		return fmt.Sprintf("  ⑂ %s: %d succeeded, %d failed — %s", name, dataInt(e.Data, "success_count"), dataInt(e.Data, "failure_count"), FormatDuration(e.Duration))
	case EventInterviewStarted:
		return "  ? " + formatQuestion(e.Question)
	case EventInterviewCompleted:
		return "  ✎ " + formatAnswer(e.Answer)
	case EventInterviewTimeout:
		return fmt.Sprintf("  ⏱ %s: no answer after %s", name, FormatDuration(e.Duration))
	case EventWarning:
		return "  ! " + e.Message
	case EventAgentResponse:
		return "    │ " + truncate(firstLine(e.Message), 200)
	case EventContextUpdated:
		return "    context: " + strings.Join(dataStrings(e.Data, "keys"), ", ")
	case EventWorkspaceChanged:
		return describeChanges(name, branch, e.Changes)
	case EventCheckpointSaved:
		return "    checkpoint after " + e.NodeID
	}
	return ""
}

// Event.Data read type-tolerantly: an event decoded from JSON (the trace,
// the store) holds float64 (or json.Number) where the engine put an int,
// and []any where it put []string.

func dataString(data map[string]any, key string) string {
	s, _ := data[key].(string)
	return s
}

func dataBool(data map[string]any, key string) bool {
	b, _ := data[key].(bool)
	return b
}

func dataInt(data map[string]any, key string) int {
	switch v := data[key].(type) {
	case int:
		return v
	case int64:
		return int(v)
	case float64:
		return int(v)
	case json.Number:
		n, _ := v.Int64()
		return int(n)
	}
	return 0
}

func dataStrings(data map[string]any, key string) []string {
	switch v := data[key].(type) {
	case []string:
		return v
	case []any:
		out := make([]string, 0, len(v))
		for _, x := range v {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

func formatDecision(d *Decision, branch string) string {
	if d == nil {
		return ""
	}
	to := d.To
	if to == "" {
		to = "(nowhere)"
	}
	why := d.Rule
	switch d.Rule {
	case "condition", "fail_condition":
		why += " " + d.Values["condition"]
	case "preferred_label":
		why += " " + d.Values["preferred_label"]
	case "goal_gate_retry":
		why = "goal gate " + d.Values["gate"] + " unsatisfied"
	}
	return fmt.Sprintf("  ⤷ %s → %s (%s)%s", d.From, to, why, branch)
}

func formatQuestion(q *Question) string {
	if q == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString(q.Text)
	for _, o := range q.Options {
		fmt.Fprintf(&b, "  [%s] %s", o.Key, NormalizeLabelDisplay(o.Label))
	}
	return b.String()
}

func formatAnswer(a *Answer) string {
	if a == nil {
		return ""
	}
	by := ""
	if a.By != "" {
		by = " (" + a.By + ")"
	}
	switch a.Kind {
	case AnswerText:
		return "answered: " + truncate(a.Text, 200) + by
	case AnswerSkipped:
		return "skipped" + by
	}
	return "answered: " + a.Value + by
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

// FormatDuration renders a duration the way the live log does: 250ms, 45s,
// 1m 12s, 2h 5m.
func FormatDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Round(time.Second).Seconds()))
	case d < time.Hour:
		d = d.Round(time.Second)
		return fmt.Sprintf("%dm %ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	d = d.Round(time.Minute)
	return fmt.Sprintf("%dh %dm", int(d.Hours()), int(d.Minutes())%60)
}
