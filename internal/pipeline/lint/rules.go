package lint

import (
	"slices"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/lint/didyoumean"
	"nanohost/internal/pipeline/mask"
	"nanohost/internal/pipeline/persona"
)

// checker carries what the option-dependent rules need.
type checker struct {
	loc        *locator
	knownTypes []string
	personas   *persona.Catalog
	masks      mask.Set
	agents     *Agents
	conds      map[string]parsedCondition // conditions parsed once for every rule
	attrsOf    *pipeline.Graph            // the graph attrs holds attrFindings of
	attrs      [][]pipeline.Diagnostic
}

// builtinRules returns the built-in rules in a fixed order: the §7.2 rules,
// then nanohost's extra checks.
func builtinRules(opts Options) []Rule {
	c := &checker{loc: newLocator(opts.Source), knownTypes: opts.KnownTypes, personas: persona.OrBuiltin(opts.Personas), masks: opts.Masks, agents: opts.Agents}
	if len(c.knownTypes) == 0 {
		c.knownTypes = DefaultKnownTypes
	}
	return []Rule{
		RuleFunc("start_node", startNode),
		RuleFunc("terminal_node", terminalNode),
		RuleFunc("reachability", reachability),
		RuleFunc("edge_target_exists", edgeTargetExists),
		RuleFunc("start_no_incoming", startNoIncoming),
		RuleFunc("exit_no_outgoing", exitNoOutgoing),
		RuleFunc("condition_syntax", c.conditionSyntax),
		RuleFunc("condition_type", c.conditionType),
		RuleFunc("condition_key", c.conditionKey),
		RuleFunc("output_schema", c.outputSchema),
		RuleFunc("var_refs", c.varRefs),
		RuleFunc("stylesheet_syntax", c.stylesheetSyntax),
		RuleFunc("type_known", c.typeKnown),
		RuleFunc("fidelity_valid", c.fidelityValid),
		RuleFunc("retry_target_exists", c.retryTargetExists),
		RuleFunc("goal_gate_has_retry", goalGateHasRetry),
		RuleFunc("prompt_on_llm_nodes", promptOnLLMNodes),
		// Beyond §7.2.
		RuleFunc("attr_type", c.attrType),
		RuleFunc("attr_value", c.attrValue),
		RuleFunc("attr_unknown", c.attrUnknown),
		RuleFunc("dead_end", deadEnd),
		RuleFunc("persona_known", c.personaKnown),
		RuleFunc("mask_known", c.maskKnown),
		RuleFunc("mask_valid_for", c.maskValidFor),
		RuleFunc("team_known", c.teamKnown),
		RuleFunc("auto_affinity", c.autoAffinity),
		RuleFunc("foreach_shape", c.foreachShape),
		RuleFunc("sub_pipeline", subPipeline),
		RuleFunc("provider_known", c.providerKnown),
		RuleFunc("tool_hooks_agent", c.toolHooksAgent),
	}
}

// BuiltinRuleNames lists the built-in rules in run order.
func BuiltinRuleNames() []string {
	var names []string
	for _, r := range builtinRules(Options{}) {
		names = append(names, r.Name())
	}
	return names
}

// nodeAttr points d at n's attribute key when the source shows it.
func (c *checker) nodeAttr(d pipeline.Diagnostic, n *pipeline.Node, key string) pipeline.Diagnostic {
	if m, ok := c.loc.attrAfter(n.Pos, key, n.Attrs[key]); ok {
		p := c.loc.keyPos(m)
		d.Line, d.Column = p.Line, p.Column
	}
	return d
}

// edgeAttr points d at e's attribute key when the source shows it.
func (c *checker) edgeAttr(d pipeline.Diagnostic, e *pipeline.Edge, key string) pipeline.Diagnostic {
	if m, ok := c.loc.attrAfter(e.Pos, key, e.Attrs[key]); ok {
		p := c.loc.keyPos(m)
		d.Line, d.Column = p.Line, p.Column
	}
	return d
}

// graphAttr points d at the graph attribute's key when the source shows it.
func (c *checker) graphAttr(d pipeline.Diagnostic, g *pipeline.Graph, key string) pipeline.Diagnostic {
	if m, ok := c.loc.graphAttr(key, g.Attrs[key]); ok {
		p := c.loc.keyPos(m)
		d.Line, d.Column = p.Line, p.Column
	}
	return d
}

// closest is did-you-mean over candidates.
func closest(word string, candidates []string) string {
	if slices.Contains(candidates, word) {
		return ""
	}
	return didyoumean.Closest(word, candidates)
}

// didYouMean prefixes a fix with "did you mean X? " when a candidate is close.
func didYouMean(word string, candidates []string, fix string) string {
	if guess := closest(word, candidates); guess != "" {
		return "did you mean " + guess + "? " + fix
	}
	return fix
}
