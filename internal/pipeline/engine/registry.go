package engine

import (
	"context"
	"maps"
	"slices"
	"sync"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/mask"
	"nanohost/internal/pipeline/persona"
)

// Handler executes one node (spec §4.1). It returns the node's outcome; an
// error means the handler could not do its work: errors marked Transient are
// retried, any other error becomes a FAIL outcome carrying the message.
// Handlers must be safe for concurrent use (parallel branches share them).
type Handler interface {
	Execute(ctx context.Context, st *Stage) (Outcome, error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, st *Stage) (Outcome, error)

// Execute calls f.
func (f HandlerFunc) Execute(ctx context.Context, st *Stage) (Outcome, error) { return f(ctx, st) }

// Stage is everything a handler gets for one execution of a node.
type Stage struct {
	Node    *pipeline.Node
	Graph   *pipeline.Graph
	Context *Context // the run's (or the parallel branch's) context; read it, return changes as ContextUpdates
	RunID   string
	// LogsRoot is the directory stage directories live in; StageDir is
	// {LogsRoot}/{node id}, created before the handler runs.
	LogsRoot string
	StageDir string
	// Visit counts visits of this node in the run (1 for the first);
	// Attempt is the 1-based attempt within this visit; Execution counts the
	// node's executions over the run, retries and visits included (see
	// Request.Execution).
	Visit, Attempt, Execution int
	// Incoming is the edge the walk took to reach the node (nil for the
	// start node, retry-target jumps and the first node after a resume).
	Incoming *pipeline.Edge
	// PrevNode is the node executed before this one ("" for the start node).
	PrevNode string
	// Branch names the parallel branch this stage runs in ("" at top level).
	Branch string
	// Persona is who works the node (nil: none); Masks are the masks it
	// wears, first = outermost (identity.go).
	Persona *persona.Persona
	Masks   []*mask.Mask
	// Element is the element whose traits the visit works by ("" for
	// none; traits.go): Node's attributes already hold its numbers.
	Element string

	w *walker
	// next, when set by a handler (parallel), is where the walk continues
	// instead of following an edge.
	next string
	// branchNodes lists the nodes parallel branches completed, for completed_nodes.
	branchNodes []string
	usage       Usage
	changes     *WorkspaceChanges // what the visit changed in the workspace, when recorded
	response    string            // the Clean agent text, for the run history
	freshDir    bool              // StageDir was created for this execution
	dirReady    bool              // StageDir is a directory of its own (not a planted link)
	reask       int               // times the typed output was sent back (Request.Reask)
}

// Emit sends an event on behalf of the stage (RunID, Seq and Time are filled
// in; NodeID and Branch default to the stage's).
func (st *Stage) Emit(e Event) {
	if e.NodeID == "" {
		e.NodeID = st.Node.ID
	}
	if e.Branch == "" {
		e.Branch = st.Branch
	}
	st.w.r.emit(e)
}

// Warn emits a Warning event for the stage.
func (st *Stage) Warn(msg string) {
	st.Emit(Event{Type: EventWarning, Label: st.Node.Label(), Message: msg})
}

// AddUsage records what an agent call cost; the run sums it.
func (st *Stage) AddUsage(u Usage) { st.usage = st.usage.Add(u) }

// Handler type names of the built-in handlers.
const (
	TypeStart       = "start"
	TypeExit        = "exit"
	TypeCodergen    = "codergen"
	TypeHuman       = "wait.human"
	TypeConditional = "conditional"
	TypeParallel    = "parallel"
	TypeFanIn       = "parallel.fan_in"
	TypeTool        = "tool"
	TypeManagerLoop = "stack.manager_loop"
)

// Registry maps handler type names to handlers (spec §4.2).
type Registry struct {
	mu       sync.RWMutex
	handlers map[string]Handler
}

// NewRegistry returns a registry holding the built-in handlers; Register
// adds custom types or replaces built-ins.
func NewRegistry() *Registry {
	return &Registry{handlers: map[string]Handler{
		TypeStart:       noopHandler{},
		TypeExit:        noopHandler{},
		TypeCodergen:    codergenHandler{},
		TypeHuman:       humanHandler{},
		TypeConditional: conditionalHandler{},
		TypeParallel:    parallelHandler{},
		TypeFanIn:       fanInHandler{},
		TypeTool:        toolHandler{},
		TypeManagerLoop: managerLoopHandler{},
		TypeSubPipeline: subPipelineHandler{},
		TypePullRequest: pullRequestHandler{},
	}}
}

// Register maps typ to h, replacing any previous handler for typ.
func (r *Registry) Register(typ string, h Handler) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.handlers[typ] = h
}

// Resolve picks the node's handler: its explicit `type` when registered,
// else start/exit for start and exit nodes, else the type its shape maps
// to, else codergen. It also returns the type
// name used.
func (r *Registry) Resolve(n *pipeline.Node) (Handler, string) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if t := n.Attrs["type"]; t != "" {
		if h, ok := r.handlers[t]; ok {
			return h, t
		}
	}
	// A start or exit recognised by its id (start, exit, end) is one,
	// whatever its shape: it must not become an agent call.
	switch {
	case n.IsStart():
		return r.handlers[TypeStart], TypeStart
	case n.IsExit():
		return r.handlers[TypeExit], TypeExit
	}
	if t := pipeline.HandlerTypeForShape(n.Shape()); t != "" {
		if h, ok := r.handlers[t]; ok {
			return h, t
		}
	}
	return r.handlers[TypeCodergen], TypeCodergen
}

// KnownTypes lists the registered type names, sorted (lint uses it to warn
// about unknown `type` values).
func (r *Registry) KnownTypes() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Sorted(maps.Keys(r.handlers))
}

// BuiltinTypes lists the built-in handler type names, sorted.
func BuiltinTypes() []string { return NewRegistry().KnownTypes() }

// noopHandler is the start and exit handler (spec §4.3, §4.4): goal gates
// are the engine's job, not the exit handler's.
type noopHandler struct{}

func (noopHandler) Execute(context.Context, *Stage) (Outcome, error) {
	return Outcome{Status: StatusSuccess}, nil
}

// conditionalHandler passes the previous stage's outcome and preferred label
// through, so a diamond's edges route on them (docs/semantics.md).
type conditionalHandler struct{}

func (conditionalHandler) Execute(_ context.Context, st *Stage) (Outcome, error) {
	out := Outcome{Status: StatusSuccess, Notes: "conditional node evaluated: " + st.Node.ID}
	if prev := st.w.last; prev != nil {
		// The walk's own previous outcome is exact (it keeps the failure reason).
		out.Status, out.PreferredLabel, out.FailureReason = prev.Status, prev.PreferredLabel, prev.FailureReason
		return out, nil
	}
	// First node after a resume: the checkpointed context has what we need.
	if s, err := ParseStatus(st.Context.GetString(KeyOutcome)); err == nil {
		out.Status = s
		if s == StatusFail {
			out.FailureReason = st.PrevNode + " failed (before the run was resumed)"
		}
	}
	out.PreferredLabel = st.Context.GetString(KeyPreferredLabel)
	return out, nil
}
