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

func (b *Backend) emit(e Event) {
	if b.cfg.OnEvent != nil {
		b.cfg.OnEvent(e)
	}
}
