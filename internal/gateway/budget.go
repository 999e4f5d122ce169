package gateway

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Limit bounds tokens (input + output) and cost; zero fields are no limit.
type Limit struct {
	Tokens  int64   `yaml:"tokens" json:"tokens,omitempty"`
	CostUSD float64 `yaml:"cost_usd" json:"cost_usd,omitempty"`
}

// exhausted words what a spent limit refuses ("" while there is room).
// A call is refused once the meter reached the limit: the gateway cannot
// know a call's size before the model answers, so the call that crosses
// the limit completes and the next one is refused.
func (l Limit) exhausted(what string, used Usage) string {
	if l.Tokens > 0 && used.Tokens() >= l.Tokens {
		return fmt.Sprintf("%s budget exhausted: %s of %s tokens", what, thousands(used.Tokens()), thousands(l.Tokens))
	}
	if l.CostUSD > 0 && used.CostUSD >= l.CostUSD {
		return fmt.Sprintf("%s budget exhausted: $%.4f of $%s", what, used.CostUSD, strconv.FormatFloat(l.CostUSD, 'f', -1, 64))
	}
	return ""
}

// thousands writes n with comma separators (201,332).
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// Total is what one group spent on one model.
type Total struct {
	Group, Model string
	Calls        int64
	Refused      int64
	Usage
}

type nodeKey struct{ run, node string }
type dayKey struct{ group, day string } // group "" = everyone

// meters hold what was spent per node, run, group and day, and in all.
type meters struct {
	now                     func() time.Time
	groupDaily, globalDaily Limit

	mu     sync.Mutex
	runs   map[string]Usage
	nodes  map[nodeKey]Usage
	days   map[dayKey]Usage
	totals map[[2]string]*Total
}

func newMeters(cfg Config) *meters {
	return &meters{now: cfg.Now, groupDaily: cfg.GroupDaily, globalDaily: cfg.GlobalDaily,
		runs: map[string]Usage{}, nodes: map[nodeKey]Usage{}, days: map[dayKey]Usage{}, totals: map[[2]string]*Total{}}
}

func (m *meters) day() string { return m.now().UTC().Format(time.DateOnly) }

// seedRun starts a run's meter at what its record says it spent, unless
// this process already metered more.
func (m *meters) seedRun(run string, spent Usage) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if spent.Tokens() > m.runs[run].Tokens() || spent.CostUSD > m.runs[run].CostUSD {
		m.runs[run] = spent
	}
}

// refusal is why a call for b may not go out now ("" when it may).
func (m *meters) refusal(b Binding) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	day := m.day()
	checks := []struct {
		limit Limit
		what  string
		used  Usage
	}{
		{b.NodeLimit, "node " + b.Node, m.nodes[nodeKey{b.Run, b.Node}]},
		{b.RunLimit, "run", m.runs[b.Run]},
		{m.groupDaily, "group " + b.Group + "'s daily", m.days[dayKey{b.Group, day}]},
		{m.globalDaily, "daily", m.days[dayKey{"", day}]},
	}
	for _, c := range checks {
		if msg := c.limit.exhausted(c.what, c.used); msg != "" {
			return msg
		}
	}
	return ""
}

func (m *meters) charge(b Binding, model string, u Usage) {
	m.mu.Lock()
	defer m.mu.Unlock()
	day := m.day()
	m.runs[b.Run] = m.runs[b.Run].Add(u)
	k := nodeKey{b.Run, b.Node}
	m.nodes[k] = m.nodes[k].Add(u)
	for _, g := range []string{b.Group, ""} {
		dk := dayKey{g, day}
		m.days[dk] = m.days[dk].Add(u)
	}
	t := m.total(b.Group, model)
	t.Calls++
	t.Usage = t.Usage.Add(u)
}

func (m *meters) countRefusal(b Binding) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.total(b.Group, "").Refused++
}

// total is the entry of group and model (m.mu held).
func (m *meters) total(group, model string) *Total {
	k := [2]string{group, model}
	t, ok := m.totals[k]
	if !ok {
		t = &Total{Group: group, Model: model}
		m.totals[k] = t
	}
	return t
}

func (m *meters) list() []Total {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Total, 0, len(m.totals))
	for _, t := range m.totals {
		out = append(out, *t)
	}
	slices.SortFunc(out, func(a, b Total) int {
		if c := strings.Compare(a.Group, b.Group); c != 0 {
			return c
		}
		return strings.Compare(a.Model, b.Model)
	})
	return out
}

// RunSpent is what the gateway metered for a run in this process.
func (g *Gateway) RunSpent(run string) Usage {
	g.meters.mu.Lock()
	defer g.meters.mu.Unlock()
	return g.meters.runs[run]
}
