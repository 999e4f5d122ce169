package container

import (
	"fmt"

	"nanohost/internal/container/protocol"
	"nanohost/internal/gateway"
	"nanohost/internal/mounts"
	"nanohost/internal/pipeline/engine"
)

// Gateway is how agent containers reach the host's model gateway.
type Gateway struct {
	// Admit issues one container's pass (gateway.Gateway.Admit).
	Admit func(gateway.Binding) *gateway.Pass
	// Socket is the host path of the gateway's unix socket, mounted
	// read-only into every agent container (containers on this host: the
	// container needs no network to reach it).
	Socket string
	// URL is the gateway as containers reach it over the network (a
	// runtime whose containers share no filesystem with the host: Kubernetes).
	URL string
	// EgressSocket and EgressURL are the egress proxy to the allowed hosts
	// (gateway.Egress), the same two ways; "" for none.
	EgressSocket, EgressURL string
}

// ModelCredentials are the secrets that, with a gateway, only the gateway
// holds: never handed to an agent.
var ModelCredentials = []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN", "OPENAI_API_KEY"}

// admit gives an agent container its pass: the token goes with the first
// request's secrets (as the model API keys the agent's SDKs read), the way
// to the gateway in its Gateway field, and the socket into spec's mounts.
func (b *Backend) admit(req engine.Request, env RunEnv, spec *Spec, first *protocol.Request) (*gateway.Pass, error) {
	gw := b.cfg.Gateway
	if gw == nil {
		return nil, nil
	}
	switch {
	case isRemote(b.cfg.Runtime) && gw.URL != "":
		first.Gateway = gw.URL
	case !isRemote(b.cfg.Runtime) && gw.Socket != "":
		first.Gateway = "unix:" + protocol.GatewaySocket
		spec.Mounts = append(spec.Mounts, mounts.Mount{Source: gw.Socket, Target: protocol.GatewaySocket, ReadOnly: true})
	default:
		return nil, fmt.Errorf("the model gateway has no address this runtime's containers can reach (a socket for Docker, a URL for Kubernetes)")
	}
	switch {
	case isRemote(b.cfg.Runtime) && gw.EgressURL != "":
		first.Egress = gw.EgressURL
	case !isRemote(b.cfg.Runtime) && gw.EgressSocket != "":
		first.Egress = "unix:" + protocol.EgressSocket
		spec.Mounts = append(spec.Mounts, mounts.Mount{Source: gw.EgressSocket, Target: protocol.EgressSocket, ReadOnly: true})
	}
	bu := req.Budget
	pass := gw.Admit(gateway.Binding{
		Run: req.RunID, Node: req.NodeID, Group: env.Group, Container: spec.Name,
		NodeLimit: gateway.Limit{Tokens: bu.NodeTokens, CostUSD: bu.NodeCostUSD},
		RunLimit:  gateway.Limit{Tokens: bu.RunTokens, CostUSD: bu.RunCostUSD},
		RunSpent:  gateway.Usage{InputTokens: bu.RunSpent.InputTokens, OutputTokens: bu.RunSpent.OutputTokens, CostUSD: bu.RunSpent.CostUSD},
	})
	secrets := make(map[string]string, len(first.Secrets)+2)
	for k, v := range first.Secrets {
		secrets[k] = v
	}
	for _, k := range ModelCredentials {
		delete(secrets, k)
	}
	secrets["ANTHROPIC_API_KEY"] = pass.Token()
	secrets["OPENAI_API_KEY"] = pass.Token()
	secrets[protocol.EnvGatewayToken] = pass.Token()
	first.Secrets = secrets
	return pass, nil
}

// metered is what a dispatch cost by the gateway's meter — the numbers the
// run reports, which the agent cannot change — and the budget refusal its
// calls met, if any.
type metered struct {
	pass    *gateway.Pass
	billed  gateway.Usage // what earlier dispatches of the container were charged
	refused int           // the refusals earlier dispatches already reported
}

// take returns the usage since the last take and a refusal new since then.
func (m *metered) take() (engine.Usage, string) {
	spent := m.pass.Spent()
	refusal, refusals := m.pass.Refusal()
	d := engine.Usage{InputTokens: spent.InputTokens - m.billed.InputTokens, OutputTokens: spent.OutputTokens - m.billed.OutputTokens,
		CostUSD: spent.CostUSD - m.billed.CostUSD, CostUnknown: spent.UnpricedCalls > m.billed.UnpricedCalls}
	m.billed = spent
	if refusals == m.refused {
		return d, ""
	}
	m.refused = refusals
	return d, refusal
}

func revoke(p *gateway.Pass) {
	if p != nil {
		p.Revoke()
	}
}

// withRevoke makes cleanup revoke the pass too: a token dies with its container.
func withRevoke(cleanup func(), p *gateway.Pass) func() {
	if p == nil {
		return cleanup
	}
	return func() {
		cleanup()
		p.Revoke()
	}
}

// spent is a result carrying what a failed dispatch cost by the gateway's
// meter (an empty result without a gateway): a call the model answered
// counts even when the node timed out.
func (s *session) spent() engine.Result {
	if s.meter == nil {
		return engine.Result{}
	}
	u, _ := s.meter.take()
	return engine.Result{Usage: u}
}
