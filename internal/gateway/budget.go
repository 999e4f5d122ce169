package gateway

import (
	"context"
	"fmt"
	"log/slog"
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

// Ledger keeps what was spent per UTC day, group and model beyond this
// process (the store: internal/store's model_spend): the group/day and
// daily budgets count from it, so a restart does not reset them and
// replicas sharing a database share them.
type Ledger interface {
	// AddModelSpend adds one call's usage to what group spent on model on day.
	AddModelSpend(ctx context.Context, day, group, model string, u Usage) error
	// ModelSpend is what group spent on day, and what all groups did.
	ModelSpend(ctx context.Context, day, group string) (groupSpent, all Usage, err error)
}

// meters hold what was spent per node, run, group and day, and in all.
type meters struct {
	now                     func() time.Time
	groupDaily, globalDaily Limit
	ledger                  Ledger // nil: the days are counted in this process only
	log                     *slog.Logger

	mu     sync.Mutex
	runs   map[string]Usage
	nodes  map[nodeKey]Usage
	days   map[dayKey]Usage
	totals map[[2]string]*Total
}

func newMeters(cfg Config) *meters {
	return &meters{now: cfg.Now, groupDaily: cfg.GroupDaily, globalDaily: cfg.GlobalDaily, ledger: cfg.Ledger, log: cfg.Logger,
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

// refusal is why a call for b may not go out now ("" when it may). The
// days' meters are the ledger's when there is one (with what this process
// counted, should a write to it have failed).
func (m *meters) refusal(ctx context.Context, b Binding) string {
	day := m.day()
	var groupDay, allDay Usage
	ledgerOK := false
	if m.ledger != nil && (m.groupDaily != (Limit{}) || m.globalDaily != (Limit{})) {
		var err error
		if groupDay, allDay, err = m.ledger.ModelSpend(ctx, day, b.Group); err != nil {
			m.log.Warn("read the day's model spend; counting this process's only", "err", err)
		} else {
			ledgerOK = true
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !ledgerOK {
		groupDay, allDay = Usage{}, Usage{}
	}
	checks := []struct {
		limit Limit
		what  string
		used  Usage
	}{
		{b.NodeLimit, "node " + b.Node, m.nodes[nodeKey{b.Run, b.Node}]},
		{b.RunLimit, "run", m.runs[b.Run]},
		{m.groupDaily, "group " + b.Group + "'s daily", atLeast(groupDay, m.days[dayKey{b.Group, day}])},
		{m.globalDaily, "daily", atLeast(allDay, m.days[dayKey{"", day}])},
	}
	for _, c := range checks {
		if msg := c.limit.exhausted(c.what, c.used); msg != "" {
			return msg
		}
	}
	return ""
}

// atLeast is a with each count raised to b's where b's is higher.
func atLeast(a, b Usage) Usage {
	a.InputTokens, a.OutputTokens = max(a.InputTokens, b.InputTokens), max(a.OutputTokens, b.OutputTokens)
	a.CacheWrite, a.CacheRead = max(a.CacheWrite, b.CacheWrite), max(a.CacheRead, b.CacheRead)
	a.CostUSD, a.UnpricedCalls = max(a.CostUSD, b.CostUSD), max(a.UnpricedCalls, b.UnpricedCalls)
	return a
}

func (m *meters) charge(b Binding, model string, u Usage) {
	day := m.day()
	m.mu.Lock()
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
	m.mu.Unlock()
	if m.ledger != nil {
		// The call is over: its spend is recorded even if the agent hung up.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.ledger.AddModelSpend(ctx, day, b.Group, model, u); err != nil {
			m.log.Warn("record model spend", "run", b.Run, "group", b.Group, "err", err)
		}
	}
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
