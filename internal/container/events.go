package container

// EventKind is a container lifecycle step.
type EventKind string

const (
	// EventStarted: a new container started for a node.
	EventStarted EventKind = "started"
	// EventReused: a full-fidelity node was sent to its thread's live container.
	EventReused EventKind = "reused"
	// EventStopped: a container was stopped and removed.
	EventStopped EventKind = "stopped"
)

// RequestHandedMsg is the debug log message of a request handed to an
// agent (or tool) container: a new one (how=started) or a live one
// (how=reused).
const RequestHandedMsg = "an agent container has a node's request"

// Event reports a container lifecycle step to Config.OnEvent.
type Event struct {
	Kind      EventKind
	Container string // name
	ID        string // runtime id ("" for reused)
	RunID     string
	NodeID    string
	Thread    string // "" for one-shot and tool containers
	Reason    string // why it stopped
}

// emit reports e to Config.OnEvent. A started or reused container has
// just been handed a node's request: that is logged (debug), so whoever
// reads the log — an operator, a test killing the host mid-answer — sees
// when the agent has it.
func (b *Backend) emit(e Event) {
	if e.Kind == EventStarted || e.Kind == EventReused {
		b.log.Debug(RequestHandedMsg, "container", e.Container, "how", string(e.Kind), "run", e.RunID, "node", e.NodeID)
	}
	if b.cfg.OnEvent != nil {
		b.cfg.OnEvent(e)
	}
}
