package report

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"nanohost/internal/channels"
	"nanohost/internal/pipeline/engine"
)

// EventMessage is the thread message for one engine event at verbosity v,
// worded as in the host document ("→ Implement (3/5)", "✓ Implement —
// 2m 30s", "✗ Run Tests — 3s — 2 failures", "↻ Retry: …"). ok is false
// when v hides the event. PipelineStarted is never a thread message: it is
// the root status card.
func EventMessage(e engine.Event, v channels.Verbosity) (m channels.Message, ok bool) {
	level, text, detail := describe(e)
	if text == "" || !v.AtLeast(level) {
		return channels.Message{}, false
	}
	return channels.Message{Text: text, Detail: detail}, true
}

// describe returns the least verbosity showing e, and its wording.
func describe(e engine.Event) (level channels.Verbosity, text, detail string) {
	const (
		minimal  = channels.VerbosityMinimal
		standard = channels.VerbosityStandard
		verbose  = channels.VerbosityVerbose
	)
	name := stageName(e)
	switch e.Type {
	case engine.EventPipelineResumed:
		return minimal, joinDash("↻ Resumed from checkpoint", name), ""
	case engine.EventPipelineCompleted:
		return minimal, joinDash("✓ Pipeline complete", dur(e.Duration), usageCost(e.Usage)), ""
	case engine.EventPipelineFailed:
		return minimal, joinDash("✗ Pipeline failed", dur(e.Duration), e.Message, usageCost(e.Usage)), ""
	case engine.EventStageStarted:
		return standard, "→ " + channels.Progress(name, e.Index, e.Total), ""
	case engine.EventStageCompleted:
		return stageCompleted(e, name)
	case engine.EventStageFailed:
		return minimal, joinDash("✗ "+name, dur(e.Duration), e.Message), ""
	case engine.EventStageRetrying:
		return standard, retryText(e, name), ""
	case engine.EventDecision:
		return decisionText(e)
	case engine.EventWarning:
		return standard, "⚠ " + e.Message, ""
	case engine.EventAgentResponse:
		return verbose, "💬 " + name, e.Message
	case engine.EventContextUpdated:
		return verbose, "≡ Context updated: " + contextKeys(e), ""
	case engine.EventCheckpointSaved:
		return verbose, joinDash("💾 Checkpoint saved", name), ""
	case engine.EventParallelStarted:
		return standard, parallelStartText(e, name), ""
	case engine.EventParallelBranchStarted:
		return verbose, "  ↳ Branch " + branchName(e) + " started", ""
	case engine.EventParallelBranchCompleted:
		if e.Status == engine.StatusFail {
			return minimal, joinDash("  ✗ Branch "+branchName(e), dur(e.Duration), e.Message), ""
		}
		return verbose, joinDash("  ✓ Branch "+branchName(e), dur(e.Duration)), ""
	case engine.EventParallelCompleted:
		return standard, joinDash("⫘ Parallel done", name, dur(e.Duration), e.Message), ""
	}
	// PipelineStarted is the root card; interview events are the gate
	// prompt itself, edited in place; anything else is for the logs.
	return "", "", ""
}

func stageCompleted(e engine.Event, name string) (channels.Verbosity, string, string) {
	d := dur(e.Duration)
	switch e.Status {
	case engine.StatusFail:
		return channels.VerbosityMinimal, joinDash("✗ "+name, d, e.Message), ""
	case engine.StatusPartialSuccess:
		return channels.VerbosityStandard, joinDash("✓ "+name, d, "partial success"), ""
	case engine.StatusSkipped:
		return channels.VerbosityStandard, "– " + name + " skipped", ""
	case engine.StatusRetry:
		return channels.VerbosityStandard, joinDash("↻ "+name, d, "asked to retry"), ""
	}
	return channels.VerbosityStandard, joinDash("✓ "+name, d), ""
}

func retryText(e engine.Event, name string) string {
	text := "↻ Retry: " + name
	if e.Attempt > 0 && e.MaxAttempt > 0 {
		text += fmt.Sprintf(" (%d/%d)", e.Attempt, e.MaxAttempt)
	}
	if e.Delay > 0 {
		text += " in " + channels.FormatDuration(e.Delay)
	}
	return joinDash(text, e.Message)
}

// routingRules are the decisions worth a message at standard verbosity:
// conditional edges and retries/loops. Unconditional edges (weight,
// lexical order) are only in the logs.
var routingRules = []string{"condition", "preferred_label", "suggested_next_ids", "fail_condition", "fail_to_conditional"}

var retryRules = []string{"retry_target", "fallback_retry_target", "graph_retry_target", "graph_fallback_retry_target", "goal_gate_retry"}

func decisionText(e engine.Event) (channels.Verbosity, string, string) {
	dec := e.Decision
	if dec == nil {
		return "", "", ""
	}
	why := decisionReason(dec)
	switch {
	case slices.Contains(routingRules, dec.Rule):
		return channels.VerbosityStandard, withParen("↳ "+dec.From+" → "+dec.To, why), ""
	case slices.Contains(retryRules, dec.Rule):
		return channels.VerbosityStandard, withParen("↻ Retry: "+dec.From+" → "+dec.To, why), ""
	case dec.Rule == "none":
		return channels.VerbosityStandard, withParen("⚠ No edge out of "+dec.From+" matched", why), ""
	}
	return "", "", ""
}

func decisionReason(d *engine.Decision) string {
	for _, k := range []string{"condition", "preferred_label", "reason", "outcome"} {
		if v := d.Values[k]; v != "" {
			if k == "outcome" {
				return "outcome=" + v
			}
			return v
		}
	}
	return ""
}

func parallelStartText(e engine.Event, name string) string {
	text := "⫘ Parallel"
	if name != "" {
		text += ": " + name
	}
	if n := e.Total; n > 0 {
		text += fmt.Sprintf(" — %d branches", n)
	}
	return text
}

func contextKeys(e engine.Event) string {
	if e.Message != "" {
		return e.Message
	}
	var keys []string
	switch ks := e.Data["keys"].(type) {
	case []string:
		keys = append(keys, ks...)
	case []any:
		for _, k := range ks {
			keys = append(keys, fmt.Sprint(k))
		}
	default:
		for k := range e.Data {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	if len(keys) == 0 {
		return "(no keys)"
	}
	return strings.Join(keys, ", ")
}

func stageName(e engine.Event) string {
	name := e.Label
	if name == "" {
		name = e.NodeID
	}
	if e.Branch != "" && e.Type != engine.EventParallelBranchStarted && e.Type != engine.EventParallelBranchCompleted {
		name = "[" + e.Branch + "] " + name
	}
	return name
}

func branchName(e engine.Event) string {
	if e.Branch != "" {
		return e.Branch
	}
	return stageName(e)
}

func usageCost(u *engine.Usage) string {
	if u == nil {
		return ""
	}
	return channels.FormatCost(u.CostUSD)
}

// joinDash joins the non-empty parts with " — ".
func joinDash(parts ...string) string {
	kept := parts[:0:0]
	for _, p := range parts {
		if p != "" {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, " — ")
}

func withParen(text, why string) string {
	if why == "" {
		return text
	}
	return text + " (" + why + ")"
}

// dur formats a duration, "" when the engine did not measure one.
func dur(d time.Duration) string {
	if d <= 0 {
		return ""
	}
	return channels.FormatDuration(d)
}
