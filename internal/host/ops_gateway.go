package host

import (
	"github.com/prometheus/client_golang/prometheus"

	"nanohost/internal/gateway"
)

// WatchGateway exports what the model gateway metered — the authoritative
// numbers — per group and model: calls, tokens, cost, and refused calls
// per group.
func (m *Metrics) WatchGateway(totals func() []gateway.Total) {
	m.Registry.MustRegister(gatewayCollector{totals})
}

var (
	gwCalls = prometheus.NewDesc("nanohost_model_calls_total",
		"Model API calls the gateway forwarded and metered, by group and model.", []string{"group", "model"}, nil)
	gwTokens = prometheus.NewDesc("nanohost_model_tokens_total",
		"Tokens the gateway metered, by group, model and direction (input includes cache writes and reads).", []string{"group", "model", "direction"}, nil)
	gwCost = prometheus.NewDesc("nanohost_model_cost_usd_total",
		"What the metered calls cost in US dollars at the configured prices (no series for a model without a price: its cost is unknown).", []string{"group", "model"}, nil)
	gwRefused = prometheus.NewDesc("nanohost_model_calls_refused_total",
		"Model calls the gateway refused because a budget was spent, by group.", []string{"group"}, nil)
)

type gatewayCollector struct{ totals func() []gateway.Total }

func (c gatewayCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{gwCalls, gwTokens, gwCost, gwRefused} {
		ch <- d
	}
}

func (c gatewayCollector) Collect(ch chan<- prometheus.Metric) {
	for _, t := range c.totals() {
		if t.Model == "" { // the group's refusals
			ch <- prometheus.MustNewConstMetric(gwRefused, prometheus.CounterValue, float64(t.Refused), t.Group)
			continue
		}
		ch <- prometheus.MustNewConstMetric(gwCalls, prometheus.CounterValue, float64(t.Calls), t.Group, t.Model)
		ch <- prometheus.MustNewConstMetric(gwTokens, prometheus.CounterValue, float64(t.InputTokens), t.Group, t.Model, "input")
		ch <- prometheus.MustNewConstMetric(gwTokens, prometheus.CounterValue, float64(t.OutputTokens), t.Group, t.Model, "output")
		if t.UnpricedCalls < t.Calls {
			ch <- prometheus.MustNewConstMetric(gwCost, prometheus.CounterValue, t.CostUSD, t.Group, t.Model)
		}
	}
}
