package config

import (
	"slices"
	"strings"
	"testing"

	"nanohost/internal/gateway"
)

func TestEgressAndGatewaySettingsAreExplained(t *testing.T) {
	problems := func(mutate func(*Config)) map[string]Problem {
		c := Defaults()
		mutate(c)
		out := map[string]Problem{}
		for _, p := range c.Check() {
			if strings.HasPrefix(p.Field, "gateway.") || p.Field == "runtime.network" || p.Field == "runtime.unrestricted_egress" {
				out[p.Field] = p
			}
		}
		return out
	}
	if ps := problems(func(*Config) {}); len(ps) != 0 {
		t.Errorf("the defaults (network none, the gateway on) have problems: %v", ps)
	}
	p := problems(func(c *Config) { c.Runtime.Network = "bridge" })["runtime.network"]
	if !p.Blocking || !strings.Contains(p.Fix, "unrestricted_egress: true") {
		t.Errorf("bridge without unrestricted_egress: %+v, want a refusal naming the setting", p)
	}
	ps := problems(func(c *Config) { c.Runtime.Network, c.Runtime.UnrestrictedEgress = "bridge", true })
	if p := ps["runtime.unrestricted_egress"]; p.Blocking || !strings.Contains(p.Message, "connect anywhere") || len(ps) != 1 {
		t.Errorf("bridge with unrestricted_egress: %v, want one warning", ps)
	}
	if p := problems(func(c *Config) { c.Gateway.Enabled = false })["gateway.enabled"]; p.Blocking || !strings.Contains(p.Message, "credentials go into every agent's environment") {
		t.Errorf("gateway off: %+v, want a warning", p)
	}
	ps = problems(func(c *Config) {
		c.Gateway.AnthropicURL = "ftp://x"
		c.Gateway.Listen = "nonsense"
		c.Gateway.Prices = map[string]gateway.Price{"m": {Input: -1}}
		c.Gateway.GroupDaily = gateway.Limit{Tokens: -5}
	})
	if others := problems(func(c *Config) { c.Runtime.Egress.Allow = []string{"github.com", "*.example.com", "https://x.org/"} }); len(others) != 0 {
		t.Errorf("problems outside runtime.egress: %v", others)
	}
	c := Defaults()
	c.Runtime.Egress.Allow = []string{"github.com", "*.example.com", "https://x.org/"}
	var egress []Problem
	for _, p := range c.Check() {
		if strings.HasPrefix(p.Field, "runtime.egress") {
			egress = append(egress, p)
		}
	}
	if len(egress) != 1 || egress[0].Field != "runtime.egress.allow[2]" || !egress[0].Blocking {
		t.Errorf("egress.allow: %v, want one refusal of the URL", egress)
	}
	c.Runtime.Egress.Allow, c.Gateway.Enabled = []string{"github.com"}, false
	if all := c.Check(); !slices.ContainsFunc(all, func(p Problem) bool { return p.Field == "runtime.egress.allow" && p.Blocking }) {
		t.Errorf("an allowlist without the gateway, whose proxy it is: %v", all)
	}
	c = Defaults()
	c.Runtime.Egress = Egress{Allow: []string{"api.github.com"}, Secrets: []BrokeredSecret{
		{Host: "api.github.com", Header: "Authorization", Value: "Bearer x"}, {Host: "elsewhere.org", Header: "X", Value: "y"}, {Host: "api.github.com"}}}
	got := map[string]Problem{}
	for _, p := range c.Check() {
		got[p.Field] = p
	}
	if _, ok := got["runtime.egress.secrets[0]"]; ok {
		t.Errorf("a complete brokered secret for an allowed host is fine: %v", got)
	}
	if !got["runtime.egress.secrets[1]"].Blocking || !got["runtime.egress.secrets[2]"].Blocking {
		t.Errorf("a secret for a host not allowed, and one without header and value: %v", got)
	}
	for _, field := range []string{"gateway.anthropic_url", "gateway.listen", "gateway.prices.m", "gateway.group_daily"} {
		if p, ok := ps[field]; !ok || !p.Blocking || p.Fix == "" {
			t.Errorf("%s: %+v, want a blocking problem with a fix", field, p)
		}
	}
}
