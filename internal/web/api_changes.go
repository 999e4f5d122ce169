package web

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runs"
	"nanohost/internal/workspace"
)

// What stages changed in the workspace (the records internal/workspace
// derives from the run's commits): a node's latest visit (or an earlier
// one), and the run's changes since it started.

// changeFiles are the record files served raw.
var changeFiles = []string{workspace.ListFile, workspace.DiffFile}

// changeSetJSON is GET /pipelines/{id}/changes and
// GET /pipelines/{id}/nodes/{node}/changes.
type changeSetJSON struct {
	RunID  string `json:"run_id"`
	NodeID string `json:"node_id,omitempty"`
	// Scope is "run" (everything its stages changed since it started) or
	// "node" (one visit of the node).
	Scope string `json:"scope"`
	// Visit is the node visit the record is of; EarlierVisits are the
	// node's earlier visits whose records are kept (?visit=N shows one).
	Visit         int                 `json:"visit,omitempty"`
	EarlierVisits []int               `json:"earlier_visits,omitempty"`
	Summary       engine.ChangeCounts `json:"summary"`
	// Overlapped names the stages that ran on the workspace during this
	// visit: their changes are in this record too.
	Overlapped []engine.StageRef `json:"overlapped,omitempty"`
	// Truncated: a diff was cut or left out at its bound.
	Truncated bool              `json:"truncated,omitempty"`
	Files     []fileChangeJSON  `json:"files"`
	Raw       map[string]string `json:"raw"`
	// Branch is the run's git branch (scope run, git workspaces).
	Branch *branchJSON `json:"branch,omitempty"`
}

// branchJSON is a run's branch as the dashboard shows it: where it
// started, how far it went, and what became of it.
type branchJSON struct {
	Name       string              `json:"name"`
	Base       string              `json:"base"`
	BaseBranch string              `json:"base_branch,omitempty"`
	Head       string              `json:"head"`
	Commits    int                 `json:"commits"`
	Summary    engine.ChangeCounts `json:"summary"`
	Pushed     string              `json:"pushed,omitempty"`
	// PullRequest is the pull request's page; FastForwarded: the group's
	// folder holds the result.
	PullRequest   string   `json:"pull_request,omitempty"`
	FastForwarded bool     `json:"fast_forwarded,omitempty"`
	Problems      []string `json:"problems,omitempty"`
}

// branchOf reads the run's branch summary from its logs root, if any.
func branchOf(root *os.Root) *branchJSON {
	ws, err := workspace.ReadSummary(root.FS())
	if err != nil {
		return nil
	}
	b := &branchJSON{Name: ws.Branch, Base: ws.Base, BaseBranch: ws.BaseBranch, Head: ws.Head, Commits: ws.Commits, Summary: ws.ChangeCounts}
	if d := ws.Delivery; d != nil {
		b.Pushed, b.PullRequest, b.FastForwarded, b.Problems = d.Pushed, d.PullRequest, d.FastForwarded, d.Problems
	}
	return b
}

type fileChangeJSON struct {
	workspace.Change
	// Header and Hunks are the file's diff (absent with ?diff=0).
	Header []string   `json:"header,omitempty"`
	Hunks  []hunkJSON `json:"hunks,omitempty"`
}

// nodeChangesJSON is the summary GET /pipelines/{id}/nodes/{node} shows.
type nodeChangesJSON struct {
	Visit      int                 `json:"visit,omitempty"`
	Summary    engine.ChangeCounts `json:"summary"`
	Overlapped []engine.StageRef   `json:"overlapped,omitempty"`
	Link       string              `json:"link"`
}

// openLogs opens the run's logs root as a root nothing can be followed out of.
func openLogs(run runs.Run) (*os.Root, error) {
	if run.LogsRoot == "" {
		return nil, fs.ErrNotExist
	}
	return os.OpenRoot(run.LogsRoot)
}

func (s *Server) getRunChanges(w http.ResponseWriter, r *http.Request) {
	run, ok := s.loadRun(w, r)
	if !ok {
		return
	}
	base := "/pipelines/" + run.ID + "/changes/"
	out := changeSetJSON{RunID: run.ID, Scope: "run", Raw: map[string]string{
		workspace.ListFile: base + workspace.ListFile, workspace.DiffFile: base + workspace.DiffFile}}
	s.serveChangeSet(w, r, run, workspace.RunDir, out, "no stage of run %[1]s has recorded a change yet")
}

func (s *Server) getNodeChanges(w http.ResponseWriter, r *http.Request) {
	run, n, ok := s.runNode(w, r)
	if !ok {
		return
	}
	stageDir := filepath.ToSlash(s.stageDir(run, n.ID))
	dir := stageDir
	out := changeSetJSON{RunID: run.ID, NodeID: n.ID, Scope: "node", Raw: map[string]string{}}
	if root, err := openLogs(run); err == nil {
		out.EarlierVisits = workspace.EarlierVisits(root.FS(), stageDir)
		root.Close()
	}
	if q := r.URL.Query().Get("visit"); q != "" {
		visit, err := strconv.Atoi(q)
		if err != nil || visit < 1 {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("visit %q is not a visit number", q), "use visit=1 for the node's first visit")
			return
		}
		if slices.Contains(out.EarlierVisits, visit) {
			dir, out.Visit = path.Join(stageDir, workspace.VisitDir(visit)), visit
		}
	}
	if dir == stageDir {
		base := "/pipelines/" + run.ID + "/nodes/" + n.ID + "/"
		out.Raw = map[string]string{workspace.ListFile: base + workspace.ListFile, workspace.DiffFile: base + workspace.DiffFile}
		if v, err := s.viewOf(r.Context(), run); err == nil {
			if c := v.Changes[n.ID]; c != nil {
				out.Overlapped = c.Overlapped
			}
		}
	}
	s.serveChangeSet(w, r, run, dir, out, "node %[2]s of run %[1]s has no change record for that visit (it runs no agent or tool, has not finished, or its visit is unknown)")
}

// serveChangeSet answers with the record in dir (relative to the logs
// root), its diff parsed and highlighted unless ?diff=0.
func (s *Server) serveChangeSet(w http.ResponseWriter, r *http.Request, run runs.Run, dir string, out changeSetJSON, missing string) {
	withDiff := r.URL.Query().Get("diff") != "0"
	root, err := openLogs(run)
	if err != nil {
		s.noRecord(w, run, out.NodeID, missing)
		return
	}
	defer root.Close()
	set, err := workspace.ReadSet(root.FS(), dir, withDiff)
	if errors.Is(err, workspace.ErrNoRecord) {
		if b := branchOf(root); out.Scope == "run" && b != nil {
			// on its branch from the start: no stage has committed yet
			out.Branch, out.Files = b, []fileChangeJSON{}
			writeJSON(w, http.StatusOK, out)
			return
		}
		s.noRecord(w, run, out.NodeID, missing)
		return
	}
	if err != nil {
		s.internalError(w, "read the change record", err)
		return
	}
	if out.Scope == "node" && out.Visit == 0 {
		out.Visit = set.Visit
	}
	if out.Scope == "run" {
		out.Branch = branchOf(root)
	}
	out.Summary = workspace.CountChanges(set.Changes)
	hl := &highlighter{budget: maxHighlight}
	out.Files = make([]fileChangeJSON, 0, len(set.Changes))
	for _, c := range set.Changes {
		f := fileChangeJSON{Change: c}
		out.Truncated = out.Truncated || c.NoDiff == workspace.NoDiffStageLimit || c.DiffTruncated
		if withDiff {
			fd := ParseSection(set.Section(c))
			f.Header, f.Hunks = fd.Header, hunksJSON(fd)
			for i := range f.Hunks {
				hl.hunk(c.Path, f.Hunks[i].Lines)
			}
		}
		out.Files = append(out.Files, f)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) noRecord(w http.ResponseWriter, run runs.Run, node, format string) {
	writeError(w, http.StatusNotFound, fmt.Sprintf(format, run.ID, node),
		"records are written from the commit of each agent or tool stage that changed files (with workspaces.git; without it runs are not recorded)")
}

// getRunChangeFile serves the run's changes.json or changes.diff raw.
func (s *Server) getRunChangeFile(w http.ResponseWriter, r *http.Request) {
	run, ok := s.loadRun(w, r)
	if !ok {
		return
	}
	s.serveRecordFile(w, run, path.Join(workspace.RunDir, r.PathValue("file")), r.PathValue("file"), run.ID+"-")
}

// serveRecordFile serves one record file raw, never sniffed into HTML.
func (s *Server) serveRecordFile(w http.ResponseWriter, run runs.Run, rel, name, prefix string) {
	if !slices.Contains(changeFiles, name) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no change record file %q", name), "the record is changes.json and changes.diff")
		return
	}
	data, more, err := readRunFile(run, rel, maxRawFile)
	if errors.Is(err, fs.ErrNotExist) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("run %s has no %s (yet)", run.ID, rel),
			"records are written when an agent or tool stage finishes")
		return
	}
	if err != nil {
		s.internalError(w, "read the change record", err)
		return
	}
	writeRaw(w, prefix+name, data, more)
}

// nodeChanges is the summary of a node's latest change record, or nil.
func (s *Server) nodeChanges(run runs.Run, node string, v *runView) *nodeChangesJSON {
	root, err := openLogs(run)
	if err != nil {
		return nil
	}
	defer root.Close()
	set, err := workspace.ReadSet(root.FS(), filepath.ToSlash(s.stageDir(run, node)), false)
	if err != nil {
		return nil
	}
	out := &nodeChangesJSON{Visit: set.Visit, Summary: workspace.CountChanges(set.Changes),
		Link: "/pipelines/" + run.ID + "/nodes/" + node + "/changes"}
	if c := v.Changes[node]; c != nil {
		out.Overlapped = c.Overlapped
	}
	return out
}
