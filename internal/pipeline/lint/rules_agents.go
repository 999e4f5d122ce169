package lint

import (
	"fmt"
	"slices"
	"strings"

	"nanohost/internal/pipeline"
)

// Rules about the host's agents (Options.Agents, from runtime.agents):
// which llm_provider values an agent serves, and which agents run
// tool_hooks. Without Options.Agents (no host known) neither applies.

// agentNode reports whether n runs an agent: an LLM stage, or a fan-in
// that weighs its branches with a prompt.
func agentNode(n *pipeline.Node) bool {
	switch n.HandlerType() {
	case "codergen":
		return true
	case "parallel.fan_in":
		return strings.TrimSpace(n.Attrs["prompt"]) != ""
	}
	return false
}

// nodeProvider is the provider a node's agent is chosen by, as the engine
// reads it (llm_provider, else the loose alias provider), lower case.
func nodeProvider(n *pipeline.Node) string {
	return strings.ToLower(strings.TrimSpace(n.Attrs.String("llm_provider", n.Attrs["provider"])))
}

// providerKnown: a node's llm_provider names a provider the host maps to
// an agent (an error: the node could not run).
func (c *checker) providerKnown(g *pipeline.Graph) []pipeline.Diagnostic {
	if c.agents == nil || c.agents.Providers == nil {
		return nil
	}
	known := c.agents.Providers
	var out []pipeline.Diagnostic
	for _, n := range g.Nodes {
		p := nodeProvider(n)
		if p == "" || !agentNode(n) || slices.Contains(known, p) {
			continue
		}
		fix := didYouMean(p, known, fmt.Sprintf("use one of %s, or ask the operator to map %s in runtime.agents", strings.Join(known, ", "), p))
		d := nodeDiag("provider_known", pipeline.SeverityError, n, fix,
			"node %s has llm_provider %q, which no agent on this host serves (runtime.agents maps %s)", n.ID, p, strings.Join(known, ", "))
		out = append(out, c.nodeAttr(d, n, "llm_provider"))
	}
	return out
}

// toolHooksAgent: tool_hooks on a node whose agent has no hook mechanism
// would never run (a warning: the node still works, unguarded).
func (c *checker) toolHooksAgent(g *pipeline.Graph) []pipeline.Diagnostic {
	if c.agents == nil {
		return nil
	}
	var out []pipeline.Diagnostic
	for _, n := range g.Nodes {
		if !agentNode(n) || !hasAny(n.Attrs, toolHookKeys) && !hasAny(g.Attrs, toolHookKeys) {
			continue
		}
		p := nodeProvider(n)
		if slices.Contains(c.agents.Hooks, p) {
			continue
		}
		who := "its agent"
		if p != "" {
			who = "the agent of provider " + p
		}
		d := nodeDiag("tool_hooks_agent", pipeline.SeverityWarning, n,
			"run the node with an agent that has hooks (Claude Code: runtime.agent or runtime.agents mapping it to claude), or drop tool_hooks",
			"node %s has tool_hooks, but %s has no hook mechanism: they will not run around its tool calls", n.ID, who)
		out = append(out, c.nodeAttr(d, n, "tool_hooks.pre"))
	}
	return out
}

var toolHookKeys = []string{"tool_hooks.pre", "tool_hooks.post"}
