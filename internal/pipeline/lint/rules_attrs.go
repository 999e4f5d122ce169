package lint

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/fidelity"
)

// Attribute rules: the §7.2 warnings about attribute values, and the typed,
// enum and spelling checks behind attr_type, attr_value and attr_unknown.

// typeKnown: an explicit `type` names a registered handler.
func (c *checker) typeKnown(g *pipeline.Graph) []pipeline.Diagnostic {
	var out []pipeline.Diagnostic
	for _, n := range g.Nodes {
		t := strings.TrimSpace(n.Attrs["type"])
		if t == "" || slices.Contains(c.knownTypes, t) {
			continue
		}
		fix := didYouMean(t, c.knownTypes, "known types: "+strings.Join(c.knownTypes, ", "))
		d := nodeDiag("type_known", pipeline.SeverityWarning, n, fix,
			"node %s has type %q, which no handler is registered for", n.ID, t)
		out = append(out, c.nodeAttr(d, n, "type"))
	}
	return out
}

// fidelityValid: fidelity modes are one of §5.4's, read the way the engine
// reads them (fidelity.ParseMode: any case, spaces ignored).
func (c *checker) fidelityValid(g *pipeline.Graph) []pipeline.Diagnostic {
	var out []pipeline.Diagnostic
	bad := func(v string) (string, bool) {
		if strings.TrimSpace(v) == "" {
			return "", false
		}
		if _, err := fidelity.ParseMode(v); err == nil {
			return "", false
		}
		return didYouMean(v, FidelityModes, "use one of "+strings.Join(FidelityModes, ", ")), true
	}
	if v := g.Attrs["default_fidelity"]; v != "" {
		if fix, isBad := bad(v); isBad {
			d := graphDiag("fidelity_valid", pipeline.SeverityWarning, fix, "default_fidelity %q is not a fidelity mode", v)
			out = append(out, c.graphAttr(d, g, "default_fidelity"))
		}
	}
	for _, n := range g.Nodes {
		if fix, isBad := bad(n.Attrs["fidelity"]); isBad {
			d := nodeDiag("fidelity_valid", pipeline.SeverityWarning, n, fix, "node %s has fidelity %q, which is not a fidelity mode", n.ID, n.Attrs["fidelity"])
			out = append(out, c.nodeAttr(d, n, "fidelity"))
		}
	}
	for _, e := range g.Edges {
		if fix, isBad := bad(e.Attrs["fidelity"]); isBad {
			d := edgeDiag("fidelity_valid", pipeline.SeverityWarning, e, fix, "edge %s -> %s has fidelity %q, which is not a fidelity mode", e.From, e.To, e.Attrs["fidelity"])
			out = append(out, c.edgeAttr(d, e, "fidelity"))
		}
	}
	return out
}

var retryKeys = []string{"retry_target", "fallback_retry_target"}

// retryTargetExists: retry targets name existing nodes.
func (c *checker) retryTargetExists(g *pipeline.Graph) []pipeline.Diagnostic {
	var out []pipeline.Diagnostic
	ids := nodeIDs(g)
	for _, key := range retryKeys {
		if t := strings.TrimSpace(g.Attrs[key]); t != "" && g.Node(t) == nil {
			d := graphDiag("retry_target_exists", pipeline.SeverityWarning, didYouMean(t, ids, "name an existing node"),
				"graph %s %q is not a node", key, t)
			out = append(out, c.graphAttr(d, g, key))
		}
	}
	for _, n := range g.Nodes {
		for _, key := range retryKeys {
			if t := strings.TrimSpace(n.Attrs[key]); t != "" && g.Node(t) == nil {
				d := nodeDiag("retry_target_exists", pipeline.SeverityWarning, n, didYouMean(t, ids, "name an existing node"),
					"node %s has %s %q, which is not a node", n.ID, key, t)
				out = append(out, c.nodeAttr(d, n, key))
			}
		}
	}
	return out
}

// goalGateHasRetry: a goal gate has somewhere to go back to when it is
// unsatisfied at exit — its own retry target or the graph's.
func goalGateHasRetry(g *pipeline.Graph) []pipeline.Diagnostic {
	if hasAny(g.Attrs, retryKeys) {
		return nil
	}
	var out []pipeline.Diagnostic
	for _, n := range g.Nodes {
		if gate, err := n.Attrs.Bool("goal_gate", false); err != nil || !gate || hasAny(n.Attrs, retryKeys) {
			continue
		}
		out = append(out, nodeDiag("goal_gate_has_retry", pipeline.SeverityWarning, n,
			fmt.Sprintf("add retry_target=%s (or the stage that should redo the work) to the node, or a graph-level retry_target", n.ID),
			"goal gate %s has no retry_target: if it has not succeeded when the run reaches the exit, the pipeline fails", n.ID))
	}
	return out
}

func hasAny(a pipeline.Attrs, keys []string) bool {
	for _, k := range keys {
		if strings.TrimSpace(a[k]) != "" {
			return true
		}
	}
	return false
}

// promptOnLLMNodes: an LLM stage says what to do.
func promptOnLLMNodes(g *pipeline.Graph) []pipeline.Diagnostic {
	var out []pipeline.Diagnostic
	for _, n := range g.Nodes {
		if n.HandlerType() != "codergen" || hasAny(n.Attrs, []string{"prompt", "label"}) {
			continue
		}
		out = append(out, nodeDiag("prompt_on_llm_nodes", pipeline.SeverityWarning, n,
			fmt.Sprintf(`add prompt="…" to %s, or give it another shape if it is not an LLM stage`, n.ID),
			"LLM stage %s has neither prompt nor label: the agent would get only the node id as its instruction", n.ID))
	}
	return out
}

// sink collects one attribute map's diagnostics with the key they are about;
// reused across maps so the hot loop does not allocate.
type sink struct {
	key   string
	found []keyedDiag
}

type keyedDiag struct {
	key string
	d   pipeline.Diagnostic
}

func (s *sink) add(d pipeline.Diagnostic) { s.found = append(s.found, keyedDiag{s.key, d}) }

// scoped is one attribute map: where it is, for diagnostics. It is built
// for every node and edge, so it holds pointers rather than a closure (one
// allocation each, three rules over a big graph).
type scoped struct {
	scope Scope
	known map[string]*Attribute // index().byScope[scope], looked up once per map
	attrs pipeline.Attrs
	c     *checker
	g     *pipeline.Graph
	n     *pipeline.Node // NodeScope
	e     *pipeline.Edge // EdgeScope
}

// diag reports a problem with the attribute key of this map.
func (s scoped) diag(rule string, sev pipeline.Severity, key, fix, format string, args ...any) pipeline.Diagnostic {
	switch s.scope {
	case NodeScope:
		return s.c.nodeAttr(nodeDiag(rule, sev, s.n, fix, "node "+s.n.ID+": "+format, args...), s.n, key)
	case EdgeScope:
		return s.c.edgeAttr(edgeDiag(rule, sev, s.e, fix, "edge "+s.e.From+" -> "+s.e.To+": "+format, args...), s.e, key)
	}
	return s.c.graphAttr(graphDiag(rule, sev, fix, "graph: "+format, args...), s.g, key)
}

// attrCheck looks at one attribute (a is what the pipeline knows of key in
// this scope, nil when nothing) and adds what is wrong with it to out.
type attrCheck func(s scoped, a *Attribute, key, value string, out *sink)

// eachAttr calls every check for every attribute of the graph, its nodes and
// edges — one walk for all of them: attribute maps are most of a graph, and
// walking them once per rule was a fifth of validating a big one — and
// returns what each check emits, in the order of checks. Maps are visited
// unordered (sorting every node's keys would dominate lint's time); the few
// attributes that yield diagnostics are put in key order, so the output is
// still deterministic.
func (c *checker) eachAttr(g *pipeline.Graph, checks ...attrCheck) [][]pipeline.Diagnostic {
	out := make([][]pipeline.Diagnostic, len(checks))
	bufs := make([]sink, len(checks))
	visit := func(s scoped) {
		for i := range bufs {
			bufs[i].found = bufs[i].found[:0]
		}
		for k, v := range s.attrs {
			a := s.known[k]
			for i, check := range checks {
				bufs[i].key = k
				check(s, a, k, v, &bufs[i])
			}
		}
		for i := range bufs {
			slices.SortStableFunc(bufs[i].found, func(a, b keyedDiag) int { return strings.Compare(a.key, b.key) })
			for _, kd := range bufs[i].found {
				out[i] = append(out[i], kd.d)
			}
		}
	}
	visit(scoped{scope: GraphScope, known: index().byScope[GraphScope], attrs: g.Attrs, c: c, g: g})
	for _, n := range g.Nodes {
		visit(scoped{scope: NodeScope, known: index().byScope[NodeScope], attrs: n.Attrs, c: c, g: g, n: n})
	}
	for _, e := range g.Edges {
		visit(scoped{scope: EdgeScope, known: index().byScope[EdgeScope], attrs: e.Attrs, c: c, g: g, e: e})
	}
	return out
}

// attrFindings is what attr_type, attr_value and attr_unknown find in g, in
// that order, from one walk of its attributes made by whichever of the three
// runs first. A checker lives for one Validate (Registry.Rules makes a new
// one), during which no rule changes the graph.
func (c *checker) attrFindings(g *pipeline.Graph) [][]pipeline.Diagnostic {
	if c.attrsOf != g {
		c.attrsOf, c.attrs = g, c.eachAttr(g, checkAttrType, checkAttrValue, newUnknownCheck())
	}
	return c.attrs
}

// attrType: integer, boolean and duration attributes have values of that
// type (an error: the engine would otherwise run with a silent default).
func (c *checker) attrType(g *pipeline.Graph) []pipeline.Diagnostic { return c.attrFindings(g)[0] }

func checkAttrType(s scoped, a *Attribute, key, _ string, out *sink) {
	if a == nil {
		return
	}
	if msg, example := typeError(a, s.attrs); msg != "" {
		fix := cmp.Or(a.Hint, fmt.Sprintf("write %s=%s", key, example))
		out.add(s.diag("attr_type", pipeline.SeverityError, key, fix, "%s", msg))
	}
}

// typeError returns what is wrong with the attribute's value, or "", and
// the value to suggest instead: the nearest integers for a fractional
// value, else the attribute's example.
func typeError(a *Attribute, attrs pipeline.Attrs) (msg, example string) {
	msg = typeProblem(a, attrs)
	example = a.Example
	if msg == "" || a.Kind != KindInt {
		return msg, example
	}
	if _, err := attrs.Int(a.Key, 0); err != nil {
		var ae *pipeline.AttrError
		if errors.As(err, &ae) && ae.Want == "a whole number" {
			example = ae.Example
		}
	}
	return msg, example
}

func typeProblem(a *Attribute, attrs pipeline.Attrs) string {
	var err error
	switch a.Kind {
	case KindInt:
		var n int
		if n, err = attrs.Int(a.Key, 0); err == nil && a.HasMin && n < a.Min {
			return fmt.Sprintf("%s=%d is below its minimum %d", a.Key, n, a.Min)
		}
	case KindFloat:
		var f float64
		if f, err = attrs.Float(a.Key, 0); err == nil && a.HasMin && f < float64(a.Min) {
			return fmt.Sprintf("%s=%s is below its minimum %d", a.Key, attrs[a.Key], a.Min)
		}
	case KindBool:
		_, err = attrs.Bool(a.Key, false)
	case KindDuration:
		d, derr := attrs.Duration(a.Key, 0)
		if err = derr; err == nil && d < 0 {
			return fmt.Sprintf("%s=%q is a negative duration", a.Key, attrs[a.Key])
		}
	default:
		return ""
	}
	if err == nil {
		return ""
	}
	var ae *pipeline.AttrError
	if errors.As(err, &ae) {
		return fmt.Sprintf("%s=%q is not %s", a.Key, ae.Value, ae.Want)
	}
	return ""
}

// attrValue: enumerated attributes have one of their values; shapes have a handler.
func (c *checker) attrValue(g *pipeline.Graph) []pipeline.Diagnostic { return c.attrFindings(g)[1] }

func checkAttrValue(s scoped, a *Attribute, key, value string, out *sink) {
	switch {
	case a == nil:
	case key == "shape" && s.scope == NodeScope:
		if d, ok := shapeDiag(s, value); ok {
			out.add(d)
		}
	case a.Kind == KindEnum:
		if v := strings.TrimSpace(value); v != "" && !containsFold(a.Values, v) {
			out.add(s.diag("attr_value", pipeline.SeverityWarning, key,
				didYouMean(v, a.Values, "use one of "+strings.Join(a.Values, ", ")),
				"%s=%q is not one of %s", key, value, quoteList(a.Values)))
		}
	case a.Kind == KindEnumList:
		for item := range strings.SplitSeq(value, ",") {
			if v := strings.TrimSpace(item); v != "" && !containsFold(a.Values, v) {
				out.add(s.diag("attr_value", pipeline.SeverityWarning, key,
					didYouMean(v, a.Values, fmt.Sprintf("list some of %s, e.g. %s=%s", strings.Join(a.Values, ", "), key, a.Example)),
					"%s lists %q, which is not one of %s", key, v, quoteList(a.Values)))
			}
		}
	}
}

// containsFold: the engine lower-cases enumerated values before using them.
func containsFold(values []string, v string) bool {
	return slices.ContainsFunc(values, func(x string) bool { return strings.EqualFold(x, v) })
}

func shapeDiag(s scoped, shape string) (pipeline.Diagnostic, bool) {
	if slices.Contains(KnownShapes, shape) {
		return pipeline.Diagnostic{}, false
	}
	if guess := closest(shape, KnownShapes); guess != "" {
		return s.diag("attr_value", pipeline.SeverityWarning, "shape", fmt.Sprintf("did you mean shape=%s?", guess),
			"shape=%s has no handler, so the node runs as an LLM stage (codergen)", shape), true
	}
	return s.diag("attr_value", pipeline.SeverityInfo, "shape",
		"use shape=box for an LLM stage, or one of "+strings.Join(KnownShapes, ", "),
		"shape=%s has no handler, so the node runs as an LLM stage (codergen)", shape), true
}

// attrUnknown: an attribute the pipeline does not know, but whose name is
// close to one it does, is almost certainly a typo that would be ignored.
// Other unknown keys pass: custom handlers read their own attributes (§4.12).
func (c *checker) attrUnknown(g *pipeline.Graph) []pipeline.Diagnostic { return c.attrFindings(g)[2] }

// newUnknownCheck is attr_unknown's check, with its own memory of the keys
// it has judged.
func newUnknownCheck() attrCheck {
	cache := map[Scope]map[string]keyVerdict{GraphScope: {}, NodeScope: {}, EdgeScope: {}}
	return func(s scoped, a *Attribute, key, _ string, out *sink) {
		if a != nil {
			return
		}
		v, ok := cache[s.scope][key]
		if !ok {
			v = judgeKey(s.scope, key)
			if len(cache[s.scope]) < maxJudgedKeys {
				cache[s.scope][key] = v
			}
		}
		if v.unknown {
			out.add(s.diag("attr_unknown", pipeline.SeverityWarning, key, v.fix, "%s", v.msg))
		}
	}
}

// maxJudgedKeys bounds the verdicts attr_unknown remembers per scope: real
// pipelines repeat a few dozen keys, a hostile one names a new key in
// every attribute, and judging one again is cheap (didyoumean.Index).
const maxJudgedKeys = 4096

type keyVerdict struct {
	fix, msg string
	unknown  bool
}

func judgeKey(scope Scope, key string) keyVerdict {
	if Lookup(scope, key) != nil {
		return keyVerdict{}
	}
	if want, ok := looseAliases[key]; ok && scope == NodeScope {
		return keyVerdict{fmt.Sprintf("did you mean %s?", want),
			fmt.Sprintf("%q is only a fallback for %s: a model_stylesheet rule or a graph-level %s overrides it", key, want, want), true}
	}
	if want, ok := aliases[scope][key]; ok {
		return keyVerdict{fmt.Sprintf("did you mean %s?", want), fmt.Sprintf("unknown %s attribute %q", scope, key), true}
	}
	if other, ok := otherScope(scope, key); ok {
		return keyVerdict{fmt.Sprintf("move %s to the %s it is meant for", key, other),
			fmt.Sprintf("%s is %s attribute; on a %s it has no effect", key, withArticle(other), scope), true}
	}
	if guess := index().guess[scope].Closest(key); guess != "" {
		return keyVerdict{fmt.Sprintf("did you mean %s?", guess), fmt.Sprintf("unknown %s attribute %q", scope, key), true}
	}
	return keyVerdict{}
}

// withArticle renders "an edge", "a node", "a graph".
func withArticle(s Scope) string {
	if s == EdgeScope {
		return "an edge"
	}
	return "a " + s.String()
}
