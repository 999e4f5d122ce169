package lint

import (
	"slices"
	"sync"

	"nanohost/internal/pipeline/fidelity"
	"nanohost/internal/pipeline/lint/didyoumean"
)

// Scope says where an attribute may appear.
type Scope uint8

const (
	GraphScope Scope = 1 << iota
	NodeScope
	EdgeScope
)

func (s Scope) String() string {
	switch s {
	case GraphScope:
		return "graph"
	case NodeScope:
		return "node"
	case EdgeScope:
		return "edge"
	}
	return "attribute"
}

// Kind is the type an attribute's value must have.
type Kind int

const (
	KindString   Kind = iota
	KindInt           // checked by attr_type (error)
	KindBool          // checked by attr_type (error)
	KindDuration      // checked by attr_type (error)
	KindFloat         // checked by attr_type (error)
	KindEnum          // one of Values (any case); checked by attr_value (warning)
	KindEnumList      // comma-separated Values; checked by attr_value (warning)
)

// Attribute describes one attribute key the pipeline understands.
type Attribute struct {
	Key     string
	Scope   Scope // bitmask of the scopes it is valid in
	Kind    Kind
	Values  []string // for KindEnum, KindEnumList
	Min     int      // for KindInt, KindFloat: the smallest valid value (when HasMin)
	HasMin  bool
	Example string // a valid value, for fixes
	// Graphviz marks layout/cosmetic attributes: valid, ignored by the engine.
	Graphviz bool
	// Hint, when set, is the fix for a value of the wrong type (instead of
	// "write key=Example").
	Hint string
}

// FidelityModes are the fidelity modes of spec §5.4, for messages.
var FidelityModes = func() []string {
	out := make([]string, len(fidelity.Modes))
	for i, m := range fidelity.Modes {
		out[i] = string(m)
	}
	return out
}()

// KnownShapes are the shapes with a handler (spec §2.8).
var KnownShapes = []string{"Mdiamond", "Msquare", "box", "hexagon", "diamond", "component", "tripleoctagon", "parallelogram", "house"}

const (
	gn  = GraphScope | NodeScope
	ne  = NodeScope | EdgeScope
	all = GraphScope | NodeScope | EdgeScope
)

// Attributes is the single list of every attribute key the front end and the
// engine understand (spec Appendix A, the handler attributes of §4, nanohost's
// additions, and the Graphviz layout attributes people put in DOT files).
// attr_type, attr_value and attr_unknown are all driven by it.
var Attributes = []Attribute{
	// Graph (spec §2.5, Appendix A).
	{Key: "goal", Scope: GraphScope, Example: `"Ship the feature"`},
	// The run inputs a pipeline needs (docs/schedules.md): a run started
	// without one of them is refused, naming it. On a sub-pipeline node
	// (type="pipeline", or a house with pipeline=…) they are the inputs
	// given to its child: key=${value},… (checked by sub_pipeline).
	{Key: "inputs", Scope: gn, Example: `"repo,ref"`},
	// The pipeline a sub-pipeline node runs as its child: a stored name or a
	// path beside the pipeline (checked by sub_pipeline).
	{Key: "pipeline", Scope: NodeScope, Example: `"triage"`},
	{Key: "label", Scope: all, Example: `"Review"`},
	{Key: "model_stylesheet", Scope: GraphScope, Example: `"* { llm_model: claude-opus-4-6; }"`},
	{Key: "default_max_retry", Scope: GraphScope, Kind: KindInt, HasMin: true, Min: 0, Example: "50"},
	{Key: "default_fidelity", Scope: GraphScope, Example: "compact"},
	{Key: "retry_target", Scope: gn, Example: "implement"},
	{Key: "fallback_retry_target", Scope: gn, Example: "plan"},
	// The manager loop reads the node's own stack.child_dotfile first, then the graph's.
	{Key: "stack.child_dotfile", Scope: gn, Example: `"child.dot"`},
	// The child's working directory inside the workspace (node, else graph).
	{Key: "stack.child_workdir", Scope: gn, Example: `"services/api"`},
	// Commands around each of the agent's tool calls, in its container (spec §9.7; tool_hooks_agent).
	{Key: "tool_hooks.pre", Scope: gn, Example: `"echo pre"`},
	{Key: "tool_hooks.post", Scope: gn, Example: `"echo post"`},
	{Key: "rankdir", Scope: GraphScope, Kind: KindEnum, Values: []string{"TB", "LR", "BT", "RL"}, Example: "LR"},
	// Engine limits and retry presets (nanohost's engine; docs/semantics.md).
	{Key: "default_max_retries", Scope: GraphScope, Kind: KindInt, HasMin: true, Min: 0, Example: "50"},
	{Key: "retry_policy", Scope: gn, Kind: KindEnum, Values: []string{"none", "standard", "aggressive", "linear", "patient"}, Example: "standard"},
	{Key: "max_steps", Scope: GraphScope, Kind: KindInt, HasMin: true, Min: 0, Example: "1000"},
	{Key: "max_restarts", Scope: GraphScope, Kind: KindInt, HasMin: true, Min: 0, Example: "5"},
	{Key: "max_tokens", Scope: GraphScope | NodeScope, Kind: KindInt, HasMin: true, Min: 0, Example: "2000000"},
	{Key: "max_cost_usd", Scope: GraphScope | NodeScope, Kind: KindFloat, HasMin: true, Min: 0, Example: "25"},

	// Node (spec §2.6, Appendix A). llm_* are also graph-level defaults (§8.5).
	{Key: "shape", Scope: NodeScope, Example: "box"},
	// The handler: spec §2.8's types and nanohost's pipeline (a sub-pipeline)
	// and pull_request (docs/semantics.md, "Pull requests"); checked by type_known.
	{Key: "type", Scope: NodeScope, Example: `"wait.human"`},
	{Key: "prompt", Scope: NodeScope, Example: `"Implement the plan"`},
	{Key: "max_retries", Scope: NodeScope, Kind: KindInt, HasMin: true, Min: 0, Example: "3"},
	{Key: "goal_gate", Scope: NodeScope, Kind: KindBool, Example: "true",
		// Some implementations put a condition or a description here, on
		// the exit node; Attractor's goal gate is a flag on a stage.
		Hint: "goal_gate is true or false on the stage that must succeed before the run may exit (§3.4), not a condition: " +
			"write goal_gate=true (with retry_target) on that stage, and route on outcomes with edge conditions"},
	{Key: "fidelity", Scope: ne, Example: "compact"},
	{Key: "thread_id", Scope: all, Example: `"loop-a"`},
	{Key: "class", Scope: NodeScope, Example: `"code,critical"`},
	{Key: "timeout", Scope: NodeScope, Kind: KindDuration, Example: `"900s"`},
	{Key: "llm_model", Scope: gn, Example: "claude-opus-4-6"},
	{Key: "llm_provider", Scope: gn, Example: "anthropic"},
	{Key: "reasoning_effort", Scope: gn, Kind: KindEnum, Values: []string{"low", "medium", "high"}, Example: "high"},
	{Key: "auto_status", Scope: NodeScope, Kind: KindBool, Example: "true"},
	{Key: "allow_partial", Scope: NodeScope, Kind: KindBool, Example: "true"},
	// Handler attributes (spec §4.6–4.11).
	{Key: "human.default_choice", Scope: NodeScope, Example: `"approve"`},
	{Key: "join_policy", Scope: NodeScope, Kind: KindEnum, Values: []string{"wait_all", "k_of_n", "first_success", "quorum"}, Example: "wait_all"},
	{Key: "error_policy", Scope: NodeScope, Kind: KindEnum, Values: []string{"fail_fast", "continue", "ignore"}, Example: "continue"},
	{Key: "max_parallel", Scope: NodeScope, Kind: KindInt, HasMin: true, Min: 1, Example: "4"},
	{Key: "join_k", Scope: NodeScope, Kind: KindInt, HasMin: true, Min: 1, Example: "2"},
	{Key: "join_quorum", Scope: NodeScope, Kind: KindFloat, HasMin: true, Min: 0, Example: "0.5"},
	// Fan-out over a list (docs/semantics.md; foreach_shape).
	{Key: "foreach", Scope: NodeScope, Example: `"triage.cases"`},
	{Key: "max_items", Scope: NodeScope, Kind: KindInt, HasMin: true, Min: 1, Example: "100"},
	{Key: "tool_command", Scope: NodeScope, Example: `"make test"`},
	{Key: "manager.poll_interval", Scope: NodeScope, Kind: KindDuration, Example: `"45s"`},
	{Key: "manager.max_cycles", Scope: NodeScope, Kind: KindInt, HasMin: true, Min: 1, Example: "1000"},
	{Key: "manager.stop_condition", Scope: NodeScope, Example: `"context.stack.child.status=completed"`},
	{Key: "manager.actions", Scope: NodeScope, Kind: KindEnumList, Values: []string{"observe", "steer", "wait"}, Example: `"observe,wait"`},
	{Key: "stack.child_autostart", Scope: NodeScope, Kind: KindBool, Example: "true"},
	// nanohost: force a fresh container (host-orchestration.md); who may answer a human gate.
	{Key: "isolated", Scope: NodeScope, Kind: KindBool, Example: "true"},
	// Typed outputs and ${…} references (docs/semantics.md).
	{Key: "output_schema", Scope: NodeScope, Kind: KindString, Example: `"review.schema.json"`},
	{Key: "output_retries", Scope: NodeScope, Kind: KindInt, HasMin: true, Min: 0, Example: "1"},
	{Key: "strict_vars", Scope: gn, Kind: KindBool, Example: "true"},
	{Key: "approvers", Scope: NodeScope, Example: `"U123,U456"`},
	// nanohost: who works the node and what it may use (walk-framework.md; persona_known, mask_known, mask_valid_for).
	{Key: "persona", Scope: NodeScope, Example: "seeker"},
	{Key: "masks", Scope: NodeScope, Example: `"recall,forge"`},
	// nanohost: elements as traits and the team walk (docs/personas.md; team_known, auto_affinity).
	{Key: "element", Scope: NodeScope, Kind: KindEnum, Values: []string{"fire", "lightning", "earth", "diamond", "water", "air", "iron"}, Example: "water"},
	{Key: "convergence", Scope: NodeScope, Kind: KindFloat, HasMin: true, Min: 0, Example: "0.85"},
	{Key: "shortcut_affinity", Scope: NodeScope, Kind: KindFloat, HasMin: true, Min: 0, Example: "0.5"},
	{Key: "evidence_depth", Scope: NodeScope, Kind: KindInt, HasMin: true, Min: 0, Example: "5"},
	{Key: "step", Scope: NodeScope, Example: "investigate"},
	{Key: "team", Scope: GraphScope, Example: `"herald,seeker,sentinel,weaver"`},
	{Key: "adversarial", Scope: GraphScope, Kind: KindBool, Example: "true"},

	// Edge (spec §2.7, Appendix A; freeform from host-orchestration.md).
	{Key: "condition", Scope: EdgeScope, Example: `"outcome=success"`},
	{Key: "weight", Scope: EdgeScope, Kind: KindInt, Example: "1"},
	{Key: "loop_restart", Scope: EdgeScope, Kind: KindBool, Example: "true"},
	{Key: "freeform", Scope: EdgeScope, Kind: KindBool, Example: "true"},
	{Key: "shortcut", Scope: EdgeScope, Kind: KindBool, Example: "true"},
}

// graphvizAttributes are layout and cosmetic Graphviz attributes: valid in a
// DOT file, ignored by the engine, never reported as unknown.
var graphvizAttributes = map[Scope][]string{
	GraphScope: {"bgcolor", "fontname", "fontsize", "fontcolor", "labelloc", "labeljust", "nodesep", "ranksep",
		"splines", "compound", "concentrate", "size", "ratio", "margin", "pad", "dpi", "newrank", "ordering",
		"style", "color", "fillcolor", "penwidth", "rank", "center", "layout", "overlap", "outputorder", "comment", "tooltip"},
	NodeScope: {"color", "fillcolor", "style", "fontname", "fontsize", "fontcolor", "width", "height", "fixedsize",
		"penwidth", "tooltip", "xlabel", "peripheries", "group", "URL", "href", "target", "margin", "image",
		"sides", "orientation", "regular", "distortion", "skew", "ordering", "comment", "labelloc", "gradientangle"},
	EdgeScope: {"color", "style", "penwidth", "arrowhead", "arrowtail", "arrowsize", "dir", "fontname", "fontsize",
		"fontcolor", "constraint", "minlen", "headport", "tailport", "lhead", "ltail", "xlabel", "taillabel",
		"headlabel", "tooltip", "decorate", "labelfloat", "samehead", "sametail", "comment", "URL", "href", "target"},
}

// looseAliases are node keys the engine reads only as a fallback (codergen
// takes `model` when llm_model is unset), which the stylesheet and the graph
// defaults silently override: worth a warning that says so.
var looseAliases = map[string]string{"model": "llm_model", "provider": "llm_provider"}

// aliases are names people use for a known attribute, by scope, with what to write instead.
var aliases = map[Scope]map[string]string{
	GraphScope: {
		"max_retries": "default_max_retry", "max_retry": "default_max_retry", "fidelity": "default_fidelity",
		"stylesheet": "model_stylesheet", "model": "llm_model", "provider": "llm_provider",
	},
	NodeScope: {
		"reasoning": "reasoning_effort", "effort": "reasoning_effort", "retries": "max_retries", "max_retry": "max_retries", "retry": "max_retries", "command": "tool_command",
		"cmd": "tool_command", "classes": "class", "handler": "type", "instructions": "prompt",
	},
	EdgeScope: {"cond": "condition", "when": "condition", "if": "condition", "priority": "weight"},
}

// attrIndex looks attributes up by scope and key.
type attrIndex struct {
	byScope map[Scope]map[string]*Attribute
	keys    map[Scope][]string // spec and Graphviz keys, for did-you-mean
	guess   map[Scope]*didyoumean.Index
}

// index is built on first use, not at start: every command of the binary
// (`--help` included) would pay for it.
var index = sync.OnceValue(buildIndex)

func buildIndex() attrIndex {
	ix := attrIndex{byScope: map[Scope]map[string]*Attribute{}, keys: map[Scope][]string{}, guess: map[Scope]*didyoumean.Index{}}
	for _, s := range []Scope{GraphScope, NodeScope, EdgeScope} {
		ix.byScope[s] = map[string]*Attribute{}
		for i := range Attributes {
			if a := &Attributes[i]; a.Scope&s != 0 {
				ix.byScope[s][a.Key] = a
				ix.keys[s] = append(ix.keys[s], a.Key)
			}
		}
		ix.guess[s] = didyoumean.NewIndex(ix.keys[s])
		for _, k := range graphvizAttributes[s] {
			if _, dup := ix.byScope[s][k]; !dup {
				ix.byScope[s][k] = &Attribute{Key: k, Scope: s, Graphviz: true}
			}
		}
	}
	return ix
}

// Lookup returns the attribute for key in scope, or nil if the pipeline does not know it.
func Lookup(scope Scope, key string) *Attribute { return index().byScope[scope][key] }

// KnownKeys returns the spec (non-Graphviz) keys valid in scope.
func KnownKeys(scope Scope) []string { return slices.Clone(index().keys[scope]) }

// otherScope returns the scope key belongs to when it is not valid in scope.
func otherScope(scope Scope, key string) (Scope, bool) {
	for _, s := range []Scope{NodeScope, EdgeScope, GraphScope} {
		if s != scope {
			if a := Lookup(s, key); a != nil && !a.Graphviz {
				return s, true
			}
		}
	}
	return 0, false
}
