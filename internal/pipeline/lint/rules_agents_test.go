package lint

import (
	"strings"
	"testing"

	"nanohost/internal/pipeline"
)

const agentsGraph = `digraph a {
    graph [tool_hooks.pre="./check-tool.sh"]
    start [shape=Mdiamond]
    plan [prompt="Plan", llm_provider=anthropic]
    code [prompt="Code", llm_provider=openai]
    exit [shape=Msquare]
    start -> plan -> code -> exit
}`

func TestAgentRules(t *testing.T) {
	agents := &Agents{Providers: []string{"anthropic", "openai"}, Hooks: []string{"", "anthropic"}}
	ds := check(t, agentsGraph, Options{Agents: agents})
	if p := byRule(ds, "provider_known"); len(p) != 0 {
		t.Errorf("provider_known:%s", dump(p))
	}
	h := byRule(ds, "tool_hooks_agent")
	if len(h) != 1 || h[0].NodeID != "code" || h[0].Severity != pipeline.SeverityWarning || !strings.Contains(h[0].Message, "provider openai has no hook mechanism") {
		t.Errorf("tool_hooks_agent:%s", dump(h))
	}
	src := strings.Replace(agentsGraph, "llm_provider=openai", "llm_provider=opneai", 1)
	p := byRule(check(t, src, Options{Agents: agents}), "provider_known")
	if len(p) != 1 || p[0].Severity != pipeline.SeverityError || !strings.Contains(p[0].Message, "anthropic, openai") || !strings.HasPrefix(p[0].Fix, "did you mean openai?") {
		t.Errorf("provider_known:%s", dump(p))
	}
	// Without a host's agents, neither rule applies.
	if ds := check(t, src, Options{}); len(byRule(ds, "provider_known"))+len(byRule(ds, "tool_hooks_agent")) != 0 {
		t.Errorf("agent rules without agents:%s", dump(ds))
	}
}
