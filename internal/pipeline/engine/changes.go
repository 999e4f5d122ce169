package engine

// WorkspaceChanges summarises what one visit of a node changed in the
// workspace: the files added, modified and deleted, and the lines its text
// diffs add and remove. A backend that commits stages (internal/workspace)
// sets it on Result; the engine reports it in a WorkspaceChanged event. The
// full record — every path and the unified diff — is in the stage
// directory (changes.json, changes.diff).
type WorkspaceChanges struct {
	ChangeCounts
	// Paths are the first few changed paths, in path order.
	Paths []string `json:"paths,omitempty"`
	// Overlapped names the stages that ran on the same workspace at some
	// time during this one: their changes are in this change set too. Only
	// events recorded before git workspaces have it (stages then shared
	// a folder); a stage's commit holds only its own changes.
	Overlapped []StageRef `json:"overlapped,omitempty"`
	// Truncated: the diff was cut at its per-file or per-stage bound.
	Truncated bool `json:"truncated,omitempty"`
	// Error says why the changes could not be recorded (all counts are 0).
	Error string `json:"error,omitempty"`
}

// ChangeCounts count a change set: its files by kind of change, and the
// lines its text diffs add and remove.
type ChangeCounts struct {
	Files        int `json:"files"`
	Added        int `json:"added"`
	Modified     int `json:"modified"`
	Deleted      int `json:"deleted"`
	LinesAdded   int `json:"lines_added"`
	LinesDeleted int `json:"lines_deleted"`
}

// StageRef names a stage of some run.
type StageRef struct {
	RunID  string `json:"run_id"`
	NodeID string `json:"node_id"`
}

// emitChanges reports what the visit changed, when a backend recorded it:
// a WorkspaceChanged event for changed files or a recording error, nothing
// for a visit that changed nothing.
func (w *walker) emitChanges(st *Stage) {
	c := st.changes
	if c == nil || (c.Files == 0 && c.Error == "") {
		return
	}
	w.emit(Event{Type: EventWorkspaceChanged, NodeID: st.Node.ID, Label: st.Node.Label(), Changes: c})
}
