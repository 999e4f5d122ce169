package engine

import (
	"time"

	"nanohost/internal/pipeline/team"
)

// EventType names an engine event (spec §9.6 and the host document).
type EventType string

const (
	EventPipelineStarted   EventType = "PipelineStarted"
	EventPipelineCompleted EventType = "PipelineCompleted"
	EventPipelineFailed    EventType = "PipelineFailed"
	EventPipelineResumed   EventType = "PipelineResumed"
	// EventPipelineCancelled ends a run someone cancelled (By says who).
	EventPipelineCancelled EventType = "PipelineCancelled"
	// EventPipelineInterrupted ends this execution of a run whose host
	// stopped under it: it resumes from its checkpoint.
	EventPipelineInterrupted EventType = "PipelineInterrupted"

	EventStageStarted   EventType = "StageStarted"
	EventStageCompleted EventType = "StageCompleted"
	EventStageFailed    EventType = "StageFailed"
	EventStageRetrying  EventType = "StageRetrying"

	EventParallelStarted         EventType = "ParallelStarted"
	EventParallelBranchStarted   EventType = "ParallelBranchStarted"
	EventParallelBranchCompleted EventType = "ParallelBranchCompleted"
	EventParallelCompleted       EventType = "ParallelCompleted"

	EventInterviewStarted   EventType = "InterviewStarted"
	EventInterviewCompleted EventType = "InterviewCompleted"
	EventInterviewTimeout   EventType = "InterviewTimeout"

	EventCheckpointSaved EventType = "CheckpointSaved"

	// EventDecision records a routing decision: which rule chose which edge and why.
	EventDecision EventType = "Decision"
	// EventWarning reports something the author should know (e.g. no outcome tag).
	EventWarning EventType = "Warning"
	// EventAgentResponse carries (a summary of) an agent's response text.
	EventAgentResponse EventType = "AgentResponse"
	// EventToolHook records one run of a tool hook around an agent's tool
	// call (Data: phase, tool, exit_code, blocked; Message: its output).
	EventToolHook EventType = "ToolHook"
	// EventContextUpdated lists the context keys a stage changed.
	EventContextUpdated EventType = "ContextUpdated"
	// EventWorkspaceChanged says what a stage changed in the workspace
	// (Changes), right after the stage's outcome; a stage whose changes
	// were not recorded, or that changed nothing, has none.
	EventWorkspaceChanged EventType = "WorkspaceChanged"
	// EventStageOutput carries a stage's valid typed output (Data "output",
	// the object; "artifact", its path in the run directory).
	EventStageOutput EventType = "StageOutput"
	// EventWalkerSwitch records who the team walk picked to work a
	// persona=auto node, and why (Switch), before its StageStarted.
	EventWalkerSwitch EventType = "WalkerSwitch"
	// EventChildStarted: a sub-pipeline node started (or resumed) its child
	// run, Data[DataChildRunID].
	EventChildStarted EventType = "ChildStarted"
	// EventSteered: a manager loop sent its child guidance (in the
	// manager's run), or a child stage received it (in the child's run);
	// Message is the guidance.
	EventSteered EventType = "Steered"
	// EventPullRequestOpened: a pull_request node pushed the run's branch
	// and opened its pull request, or found it open (Data: number, url,
	// existing).
	EventPullRequestOpened EventType = "PullRequestOpened"
)

// Event is one thing that happened in a run. Seq increases by one per event
// within a run (across resumes), so consumers can order, de-duplicate and
// resume streams.
type Event struct {
	RunID string    `json:"run_id"`
	Seq   int64     `json:"seq"`
	Time  time.Time `json:"time"`
	Type  EventType `json:"type"`

	NodeID string `json:"node_id,omitempty"`
	Label  string `json:"label,omitempty"` // node (or pipeline) display name
	// Index is the stage's 1-based position among the pipeline's stages, Total their count.
	Index int `json:"index,omitempty"`
	Total int `json:"total,omitempty"`
	// Branch names the parallel branch (its first node id) for branch events
	// and for stage events inside a branch.
	Branch string `json:"branch,omitempty"`

	Status     Status        `json:"status,omitempty"`
	Attempt    int           `json:"attempt,omitempty"`
	MaxAttempt int           `json:"max_attempt,omitempty"`
	Duration   time.Duration `json:"duration_ns,omitempty"`
	Delay      time.Duration `json:"delay_ns,omitempty"`
	Message    string        `json:"message,omitempty"` // human-readable summary / failure reason
	WillRetry  bool          `json:"will_retry,omitempty"`
	// By is who caused the event: who cancelled a run (PipelineCancelled).
	By    string `json:"by,omitempty"`
	Usage *Usage `json:"usage,omitempty"`

	Question *Question `json:"question,omitempty"`
	Answer   *Answer   `json:"answer,omitempty"`
	Decision *Decision `json:"decision,omitempty"`
	// Changes is a WorkspaceChanged event's summary.
	Changes *WorkspaceChanges `json:"changes,omitempty"`
	Data    map[string]any    `json:"data,omitempty"`

	// Persona and Masks are who worked the visit (stage events): the node's
	// persona name and the masks it wore, in equip order.
	Persona string   `json:"persona,omitempty"`
	Masks   []string `json:"masks,omitempty"`
	// Switch is a WalkerSwitch event's assignment: the walker, the one
	// before, the affinities, the zone and the rule that decided.
	Switch *team.Assignment `json:"walker_switch,omitempty"`
}

// Decision explains one edge selection.
type Decision struct {
	From string `json:"from"`
	To   string `json:"to,omitempty"` // "" when no edge was chosen
	// Rule is the step that chose: "condition", "preferred_label",
	// "suggested_next_ids", "weight", "lexical", "fallback_any_edge",
	// "fail_condition", "fail_to_conditional", "retry_target",
	// "fallback_retry_target", "graph_retry_target",
	// "graph_fallback_retry_target", "goal_gate_retry", "none",
	// "condition_error" (a condition could not be decided: the run fails); also
	// "only_edge" (a single unconditional edge), "fan_in" (a parallel
	// block continuing at the fan-in node its branches reached) and
	// "shortcut" (an edge marked shortcut=true, taken by a walker whose
	// shortcut affinity is 0.5 or more).
	Rule   string            `json:"rule"`
	Values map[string]string `json:"values,omitempty"` // what it looked at (condition text, label, outcome, …)
}

// Ends reports whether e ends an execution of its run: completed, failed,
// cancelled or interrupted.
func (e Event) Ends() bool {
	switch e.Type {
	case EventPipelineCompleted, EventPipelineFailed, EventPipelineCancelled, EventPipelineInterrupted:
		return true
	}
	return false
}

// Observer receives every event of a run, in order. It must not block for
// long: the engine calls it synchronously.
type Observer interface {
	OnEvent(Event)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(Event)

// OnEvent calls f.
func (f ObserverFunc) OnEvent(e Event) { f(e) }
