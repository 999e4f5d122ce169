package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runs"
)

// maxInlineFile bounds a node file shown inside GET /pipelines/{id}/nodes/{node};
// the raw endpoint serves up to maxRawFile.
const (
	maxInlineFile = 256 << 10
	maxRawFile    = 16 << 20
)

// nodeFiles are the per-node files the API serves, by name.
var nodeFiles = runs.StageFiles

// readRunFile reads name (relative to the run's logs root) without
// following anything out of it: agents write into stage directories, and a
// symlink planted there must not make the dashboard serve files from
// elsewhere. It returns at most limit bytes and whether there was more.
func readRunFile(run runs.Run, name string, limit int64) ([]byte, bool, error) {
	if run.LogsRoot == "" {
		return nil, false, fs.ErrNotExist
	}
	root, err := os.OpenRoot(run.LogsRoot)
	if err != nil {
		return nil, false, err
	}
	defer root.Close()
	f, err := root.Open(name)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, false, err
	}
	if !info.Mode().IsRegular() {
		return nil, false, fmt.Errorf("%s is not a regular file", name)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, false, err
	}
	if int64(len(data)) > limit {
		return data[:limit], true, nil
	}
	return data, false, nil
}

// loadCheckpoint reads the run's state as of its last commit (its
// checkpoint.json snapshot with the journal's later commits applied), in
// checkpoint.json's layout.
func (s *Server) loadCheckpoint(run runs.Run) (*engine.Checkpoint, []byte, error) {
	cp, err := s.runState(run)
	if err != nil {
		return nil, nil, err
	}
	data, err := json.Marshal(cp)
	if err != nil {
		return nil, nil, fmt.Errorf("encode the run's state: %w", err)
	}
	return cp, data, nil
}

// stageFile reads a stage file of the run: from its directory, or — when
// the stage ran on another replica sharing the store — the copy kept in
// the store.
func (s *Server) stageFile(run runs.Run, rel string, limit int64) ([]byte, bool, error) {
	data, more, err := readRunFile(run, rel, limit)
	if errors.Is(err, fs.ErrNotExist) && s.opts.Store.Capabilities().Journals {
		return s.opts.Store.RunFile(context.Background(), run.ID, filepath.ToSlash(rel), limit)
	}
	return data, more, err
}

// runState is the run's state as of its last commit: from its journal in
// the store when replicas share it (any replica may have driven the run),
// else — or for a run journaled before that — from its directory.
func (s *Server) runState(run runs.Run) (*engine.Checkpoint, error) {
	if s.opts.Store.Capabilities().Journals {
		j, err := s.opts.Store.OpenRunJournal(context.Background(), run.ID, "")
		if err != nil {
			return nil, err
		}
		cp, err := engine.StateOf(j)
		if !errors.Is(err, fs.ErrNotExist) {
			return cp, err
		}
	}
	if run.LogsRoot == "" {
		return nil, fs.ErrNotExist
	}
	return engine.LoadState(run.LogsRoot)
}

// noCheckpoint answers a run without a checkpoint yet (or an unreadable one).
func (s *Server) noCheckpoint(w http.ResponseWriter, run runs.Run, err error) {
	if errors.Is(err, fs.ErrNotExist) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("run %s has no checkpoint yet", run.ID),
			"a checkpoint is written after the first node completes; try again then")
		return
	}
	s.internalError(w, "read checkpoint", err)
}

// runCheckpoint loads the checkpoint of the run named in the path,
// answering a missing run or checkpoint itself.
func (s *Server) runCheckpoint(w http.ResponseWriter, r *http.Request) (runs.Run, *engine.Checkpoint, []byte, bool) {
	run, ok := s.loadRun(w, r)
	if !ok {
		return run, nil, nil, false
	}
	cp, data, err := s.loadCheckpoint(run)
	if err != nil {
		s.noCheckpoint(w, run, err)
		return run, nil, nil, false
	}
	return run, cp, data, true
}

func (s *Server) getCheckpoint(w http.ResponseWriter, r *http.Request) {
	if _, _, data, ok := s.runCheckpoint(w, r); ok {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_, _ = w.Write(data)
	}
}

func (s *Server) getContext(w http.ResponseWriter, r *http.Request) {
	run, cp, _, ok := s.runCheckpoint(w, r)
	if !ok {
		return
	}
	ctx := cp.Context
	if ctx == nil {
		ctx = map[string]any{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"run_id": run.ID, "as_of": cp.Timestamp, "after_node": cp.CurrentNode, "context": ctx})
}

// nodeJSON is GET /pipelines/{id}/nodes/{node}.
type nodeJSON struct {
	ID     string `json:"id"`
	Label  string `json:"label"`
	Shape  string `json:"shape"`
	Type   string `json:"type,omitempty"`
	Prompt string `json:"prompt_attr,omitempty"` // the node's prompt attribute
	State  string `json:"state"`
	Visits int    `json:"visits"`
	// Last is the latest visit: when it started and finished, its attempts,
	// outcome and cost; absent for a node that has not run.
	Last     *nodeTiming       `json:"last_visit,omitempty"`
	Files    map[string]*file  `json:"files"`
	RawLinks map[string]string `json:"raw"`
	// Changes summarises what the latest visit changed in the workspace
	// (absent without a record); Changes.Link has the diff.
	Changes *nodeChangesJSON `json:"changes,omitempty"`
}

type file struct {
	Content   string `json:"content"`
	Truncated bool   `json:"truncated,omitempty"`
}

// runNode resolves the {node} path value against the run's graph (so it can
// never name a path outside the stage directories), answering errors itself.
func (s *Server) runNode(w http.ResponseWriter, r *http.Request) (runs.Run, *pipeline.Node, bool) {
	run, ok := s.loadRun(w, r)
	if !ok {
		return run, nil, false
	}
	g, err := s.graphs.graphOf(run)
	if err != nil {
		s.internalError(w, "parse the run's pipeline", err)
		return run, nil, false
	}
	id := r.PathValue("node")
	n := g.Node(id)
	if n == nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("run %s's pipeline has no node %q", run.ID, id),
			"GET /pipelines/"+run.ID+" lists the nodes")
		return run, nil, false
	}
	return run, n, true
}

// stageDir is the node's directory relative to the logs root: under the
// checkpoint's stage root (restart-N after a loop restart).
func (s *Server) stageDir(run runs.Run, node string) string {
	if cp, _, err := s.loadCheckpoint(run); err == nil && cp.StageRoot != "" && filepath.IsLocal(cp.StageRoot) {
		return filepath.Join(cp.StageRoot, node)
	}
	return node
}

func (s *Server) getNode(w http.ResponseWriter, r *http.Request) {
	run, n, ok := s.runNode(w, r)
	if !ok {
		return
	}
	v, err := s.viewOf(r.Context(), run)
	if err != nil {
		s.internalError(w, "read events", err)
		return
	}
	out := nodeJSON{ID: n.ID, Label: n.Label(), Shape: n.Shape(), Type: n.Attrs["type"], Prompt: n.Attrs["prompt"],
		State: nonEmpty(v.States[n.ID], "pending"), Visits: v.Visits[n.ID],
		Files: map[string]*file{}, RawLinks: map[string]string{}}
	if t, ok := v.Timings[n.ID]; ok {
		out.Last = &t
	}
	dir := s.stageDir(run, n.ID)
	for _, name := range nodeFiles {
		data, more, err := s.stageFile(run, filepath.Join(dir, name), maxInlineFile)
		if err != nil {
			continue // not written (yet): a start node has no prompt
		}
		out.Files[name] = &file{Content: string(data), Truncated: more}
		out.RawLinks[name] = fmt.Sprintf("/pipelines/%s/nodes/%s/%s", run.ID, n.ID, name)
	}
	out.Changes = s.nodeChanges(run, n.ID, v)
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getNodeFile(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	if slices.Contains(changeFiles, name) {
		if run, n, ok := s.runNode(w, r); ok {
			s.serveRecordFile(w, run, filepath.Join(s.stageDir(run, n.ID), name), name, n.ID+"-")
		}
		return
	}
	if !slices.Contains(nodeFiles, name) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no node file %q", name), "a node has prompt.md, response.md and status.json (and output.json when it has an output_schema), and changes.json and changes.diff when it changed the workspace")
		return
	}
	run, n, ok := s.runNode(w, r)
	if !ok {
		return
	}
	data, more, err := s.stageFile(run, filepath.Join(s.stageDir(run, n.ID), name), maxRawFile)
	if errors.Is(err, fs.ErrNotExist) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("node %s of run %s has no %s (yet)", n.ID, run.ID, name),
			"files appear once the node has run; start and exit nodes have no prompt or response")
		return
	}
	if err != nil {
		s.internalError(w, "read node file", err)
		return
	}
	writeRaw(w, n.ID+"-"+name, data, more)
}

// writeRaw answers with a run file as it is: agent text is hostile, so it
// is plain text (a .json file JSON), never sniffed into HTML.
func writeRaw(w http.ResponseWriter, filename string, data []byte, truncated bool) {
	ct := "text/plain; charset=utf-8"
	if strings.HasSuffix(filename, ".json") {
		ct = "application/json; charset=utf-8"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Disposition", fmt.Sprintf("inline; filename=%q", filename))
	if truncated {
		w.Header().Set("X-Truncated", fmt.Sprintf("first %d bytes", maxRawFile))
	}
	_, _ = w.Write(data)
}
