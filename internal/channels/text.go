package channels

import (
	"fmt"
	"strings"
	"time"

	"nanohost/internal/pipeline/engine"
)

// Plain-text renderings of the structured message parts, for channels
// without rich formatting (the console) and for notification fallbacks.

// FormatDuration renders a duration as the engine's live log does ("45s",
// "1m 12s", "2h 5m", "250ms"), so every channel tells time the same way.
func FormatDuration(d time.Duration) string { return engine.FormatDuration(d) }

// FormatCost renders a cost in dollars, "" when unknown (zero).
func FormatCost(usd float64) string {
	if usd <= 0 {
		return ""
	}
	if usd < 0.01 {
		return "<$0.01"
	}
	return fmt.Sprintf("$%.2f", usd)
}

// StateText is a run state with its symbol: "✓ succeeded".
func StateText(s RunState) string {
	switch s {
	case RunSucceeded:
		return "✓ succeeded"
	case RunFailed:
		return "✗ failed"
	case RunCancelled:
		return "⊘ cancelled"
	case RunInterrupted:
		return "⏸ interrupted"
	case RunWaiting:
		return "⏸ waiting for an answer"
	}
	return "▶ running"
}

// Progress renders "Implement (3/5)", or just the name when the position is unknown.
func Progress(name string, index, total int) string {
	if index > 0 && total > 0 {
		return fmt.Sprintf("%s (%d/%d)", name, index, total)
	}
	return name
}

// CardTitle is a status card's title, "[Pipeline] Feature"; until the
// pipeline's name is known (the card is posted before the run's first
// event), the run id stands in for it.
func CardTitle(c StatusCard) string {
	name := c.Pipeline
	if name == "" {
		name = c.RunID
	}
	return "[Pipeline] " + name
}

// CardText is a status card on one line:
// "[Pipeline] Feature — ▶ running — Implement (3/5) — 2m 3s".
func CardText(c StatusCard) string {
	parts := []string{CardTitle(c), StateText(c.State)}
	if c.Current != "" && (c.State == RunRunning || c.State == RunWaiting || c.State == RunInterrupted) {
		parts = append(parts, Progress(c.Current, c.Index, c.Total))
	}
	parts = append(parts, FormatDuration(c.Elapsed))
	if cost := FormatCost(c.CostUSD); cost != "" {
		parts = append(parts, cost)
	}
	if c.Reason != "" {
		parts = append(parts, c.Reason)
	}
	return strings.Join(parts, " — ")
}

// OptionText is an option's label with its accelerator key shown: "[A] Approve".
func OptionText(label, key string) string {
	if key == "" || strings.Contains(label, "["+key+"]") || strings.HasPrefix(label, key+")") {
		return label
	}
	return "[" + key + "] " + label
}

// PromptText is a gate prompt as lines: the question, the choices with
// their keys, and how to answer with text when a freeform edge exists.
func PromptText(p GatePrompt) string {
	var b strings.Builder
	b.WriteString("❓ " + p.Question.Text)
	var choices []string
	freeform := ""
	for _, o := range p.Question.Options {
		if o.Freeform {
			freeform = o.Label
			continue
		}
		choices = append(choices, OptionText(o.Label, o.Key))
	}
	if len(choices) > 0 {
		b.WriteString("\n   " + strings.Join(choices, "   "))
	}
	if freeform != "" || (len(choices) == 0 && AcceptsText(p.Question)) {
		b.WriteString("\n   Reply with text to answer")
		if freeform != "" {
			b.WriteString(" " + freeform)
		}
	}
	if p.Question.TimeoutSeconds > 0 {
		b.WriteString("\n   (times out in " + FormatDuration(time.Duration(p.Question.TimeoutSeconds*float64(time.Second))) + ")")
	}
	for _, l := range p.Links {
		b.WriteString("\n   " + l.Text)
		if l.URL != "" {
			b.WriteString(": " + l.URL)
		}
	}
	return b.String()
}

// ResolutionText says how a gate ended: "✓ U123 chose Approve at 14:03 UTC".
func ResolutionText(r GateResolution) string {
	q := "❓ " + r.Prompt.Question.Text + "\n"
	switch r.Outcome {
	case GateAnswered:
		what := r.Choice
		if r.Text != "" {
			what = fmt.Sprintf("%s: %q", r.Choice, r.Text)
		}
		return q + fmt.Sprintf("✓ %s chose %s at %s", r.By, what, r.At.UTC().Format("15:04 UTC"))
	case GateTimedOut:
		return q + "⌛ Timed out. " + r.Note
	}
	return q + "⊘ " + r.Note
}
