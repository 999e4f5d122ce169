package config

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"nanohost/internal/gateway"
)

// Gateway configures the model gateway (internal/gateway): agents reach
// their model API only through the host, which holds the key, meters every
// call and enforces the budgets.
type Gateway struct {
	// Enabled (default true): agents get a per-container token instead of
	// the model credentials. false hands the credentials to the agents
	// (their tools can read and send them anywhere the network allows).
	Enabled bool `yaml:"enabled"`
	// AnthropicURL and OpenAIURL are the upstream APIs (defaults
	// https://api.anthropic.com, https://api.openai.com).
	AnthropicURL string `yaml:"anthropic_url"`
	OpenAIURL    string `yaml:"openai_url"`
	// Listen is a TCP address the gateway also answers on, for containers
	// that share no filesystem with the host (Kubernetes pods); URL is the
	// gateway as they reach it (http://<address the pods can route to>:<port>).
	// Docker containers reach it through a socket mounted into them.
	Listen string `yaml:"listen"`
	URL    string `yaml:"url"`
	// Prices per model name prefix, USD per million tokens, added to and
	// overriding the defaults; calls to a model without a price count
	// tokens and report their cost as unknown.
	Prices map[string]gateway.Price `yaml:"prices"`
	// GroupDaily bounds what each group may spend per UTC day, Daily what
	// all groups together may (tokens, cost_usd; zero: no limit).
	GroupDaily gateway.Limit `yaml:"group_daily"`
	Daily      gateway.Limit `yaml:"daily"`
}

// GatewayReachable reports whether the agents can reach the gateway:
// Docker containers through its socket, pods only at gateway.url.
func (c *Config) GatewayReachable() bool {
	return c.Gateway.Enabled && (c.Runtime.Kind != RuntimeKubernetes || c.Gateway.Listen != "" && c.Gateway.URL != "")
}

func (c *Config) checkGateway() []Problem {
	var ps []Problem
	add := func(blocking bool, field, msg, fix string) {
		ps = append(ps, Problem{Field: "gateway." + field, Message: msg, Fix: fix, Blocking: blocking})
	}
	g := c.Gateway
	if !g.Enabled {
		add(false, "enabled", "is false: the model credentials go into every agent's environment, where its tools can read them",
			"remove gateway.enabled (the gateway is on by default) unless the agent image cannot use ANTHROPIC_BASE_URL")
		return ps
	}
	for field, u := range map[string]string{"anthropic_url": g.AnthropicURL, "openai_url": g.OpenAIURL, "url": g.URL} {
		if p, err := url.Parse(u); u != "" && (err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "") {
			add(true, field, fmt.Sprintf("%q is not an http(s) URL", u), "write it as https://host[:port][/path]")
		}
	}
	if g.Listen != "" {
		if _, _, err := net.SplitHostPort(g.Listen); err != nil {
			add(true, "listen", fmt.Sprintf("%q is not host:port", g.Listen), "write it as ADDRESS:PORT, e.g. 10.0.0.5:8378")
		}
	}
	if c.Runtime.Kind == RuntimeKubernetes && !c.GatewayReachable() && c.hasModelCredentials() {
		add(false, "url", "pods share no filesystem with the host and reach the gateway only over the network, but gateway.listen and gateway.url are not both set: the agents get the model credentials instead",
			"set gateway.listen to an address the pods can route to (e.g. the node network's 10.0.0.5:8378) and gateway.url to http://10.0.0.5:8378")
	}
	for model, p := range g.Prices {
		if p.Input < 0 || p.Output < 0 || p.CacheWrite < 0 || p.CacheRead < 0 {
			add(true, "prices."+model, "has a negative price", "write USD per million tokens, e.g. {input: 3, output: 15}")
		}
	}
	for field, l := range map[string]gateway.Limit{"group_daily": g.GroupDaily, "daily": g.Daily} {
		if l.Tokens < 0 || l.CostUSD < 0 {
			add(true, field, "is negative", "set tokens and cost_usd to 0 (no limit) or more")
		}
	}
	return ps
}

// Egress configures the egress proxy.
type Egress struct {
	// Allow: "github.com" is that host, "*.example.com" any host under it.
	Allow []string `yaml:"allow"`
	// Secrets are headers the egress proxy adds to requests for their
	// (allowed) host: tools send http://host/… through the proxy, which
	// goes on over HTTPS with the header; the value never enters a container.
	Secrets []BrokeredSecret `yaml:"secrets"`
}

// BrokeredSecret is a header with a secret value for one host, e.g.
// {host: api.github.com, header: Authorization, value: "Bearer ${GITHUB_TOKEN}"}.
type BrokeredSecret struct {
	Host   string `yaml:"host"`
	Header string `yaml:"header"`
	Value  Secret `yaml:"value"`
}

var egressHost = regexp.MustCompile(`^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

func (c *Config) checkEgressAllow() []Problem {
	var ps []Problem
	for i, h := range c.Runtime.Egress.Allow {
		if !egressHost.MatchString(strings.ToLower(h)) {
			ps = append(ps, Problem{fmt.Sprintf("runtime.egress.allow[%d]", i), fmt.Sprintf("%q is not a host name", h),
				"write a host (github.com) or every host under a domain (*.example.com), without a scheme or port", true})
		}
	}
	for i, b := range c.Runtime.Egress.Secrets {
		field := fmt.Sprintf("runtime.egress.secrets[%d]", i)
		switch {
		case b.Host == "" || b.Header == "" || b.Value == "":
			ps = append(ps, Problem{field, "needs host, header and value", "write {host: api.github.com, header: Authorization, value: \"Bearer ${GITHUB_TOKEN}\"} (the value from the environment)", true})
		case !slices.Contains(c.Runtime.Egress.Allow, b.Host):
			ps = append(ps, Problem{field, fmt.Sprintf("%s is not in runtime.egress.allow", b.Host), "add the host to runtime.egress.allow", true})
		}
	}
	if len(c.Runtime.Egress.Allow) > 0 && !c.GatewayReachable() {
		ps = append(ps, Problem{"runtime.egress.allow", "is set but the agents cannot reach the gateway, whose proxy it is (gateway.enabled, or gateway.url on Kubernetes)",
			"turn the gateway on, or remove runtime.egress.allow", true})
	}
	return ps
}

// checkEgress: an agent container reaches nothing but the model gateway
// unless the operator says otherwise, in so many words.
func (c *Config) checkEgress() []Problem {
	r := c.Runtime
	if r.Network != "bridge" {
		return c.checkEgressAllow()
	}
	ps := c.checkEgressAllow()
	if !r.UnrestrictedEgress {
		return append(ps, Problem{"runtime.network", "bridge lets every agent (and every tool it runs) connect anywhere the host can, but runtime.unrestricted_egress is not true",
			"use runtime.network: none (agents reach their model through the gateway, and runtime.egress.allow's hosts through its proxy), or say runtime.unrestricted_egress: true if they must reach any host", true})
	}
	return append(ps, Problem{"runtime.unrestricted_egress", "is true: agents on the bridge network can connect anywhere the host can, and send what they read there",
		"use runtime.network: none, with runtime.egress.allow for the hosts the agents must reach", false})
}

// ModelCredentials are the agent secrets that, with the gateway, only the
// gateway holds.
var ModelCredentials = []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN", "OPENAI_API_KEY"}

func (c *Config) hasModelCredentials() bool {
	for _, name := range ModelCredentials {
		if c.secretValues[name] != "" {
			return true
		}
	}
	return false
}
