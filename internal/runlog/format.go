package runlog

import (
	"fmt"
	"strings"
	"time"

	"nanohost/internal/pipeline/engine"
)

// Duration renders a duration the way every surface shows it: 250ms, 45s,
// 1m 12s, 2h 5m.
func Duration(d time.Duration) string {
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

// Cost renders a cost in dollars: "$1.25", "<$0.01", "" when unknown (zero).
func Cost(usd float64) string {
	if usd <= 0 {
		return ""
	}
	if usd < 0.01 {
		return "<$0.01"
	}
	return fmt.Sprintf("$%.2f", usd)
}

// CostUnknownText is what a cost that cannot be known reads as: a call
// went to a model without a price (gateway.prices), whose tokens count.
const CostUnknownText = "cost unknown"

// UsageCost is what calls cost as every surface shows it: Cost's dollars,
// "cost unknown" when the calls went to a model without a price, "$1.25 +
// cost unknown" when some did — never $0 for a cost nobody knows; "" when
// no cost was reported.
func UsageCost(usd float64, unknown bool) string {
	c := Cost(usd)
	switch {
	case !unknown:
		return c
	case c == "":
		return CostUnknownText
	}
	return c + " + " + CostUnknownText
}

// UsageLine is a run's usage in full: "$0.0123 (12 input / 34 output
// tokens)", or "cost unknown (…)" when a model without a price was called.
func UsageLine(u engine.Usage) string {
	cost := fmt.Sprintf("$%.4f", u.CostUSD)
	switch {
	case u.CostUnknown && u.CostUSD == 0:
		cost = CostUnknownText
	case u.CostUnknown:
		cost += " + " + CostUnknownText
	}
	return fmt.Sprintf("%s (%d input / %d output tokens)", cost, u.InputTokens, u.OutputTokens)
}

// firstLine is s's first line, with " …" when more follows.
func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

// truncate cuts s to at most n bytes (at a rune boundary), marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}
