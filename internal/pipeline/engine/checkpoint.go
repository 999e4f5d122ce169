package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"nanohost/internal/pipeline/fidelity"
)

// File names inside a run directory.
const (
	// CheckpointFile is the latest snapshot of the run state (spec §5.6
	// layout). It is rewritten at the start and the end of a run, at a human
	// gate, when the run stops and every so often in between; the journal
	// (EventsFile) holds every commit since.
	CheckpointFile = "checkpoint.json"
	ManifestFile   = "manifest.json"
	// EventsFile is the run's journal: one JSON event per line, the commits
	// among them (docs/journal.md).
	EventsFile = "events.jsonl"
	// SourceFile holds the DOT source the run started from, written once
	// (a checkpoint names it by sha256).
	SourceFile = "pipeline.dot"
)

// maxSource bounds the pipeline source read back on resume.
const maxSource = 64 << 20

// checkpointVersion changes when the layout does in an incompatible way.
const checkpointVersion = 1

// Run states recorded in a checkpoint.
const (
	StateRunning   = "running"   // resumable: next_node is where to continue
	StateCancelled = "cancelled" // stopped by its caller; resumable
	StateSuccess   = "success"
	StateFail      = "fail"
)

// Checkpoint is the run state (spec §5.3, §5.6) plus everything a resume
// needs: a snapshot in checkpoint.json, or the state LoadCheckpoint
// rebuilds from the latest snapshot and the journal's later commits.
type Checkpoint struct {
	Version   int       `json:"version"`
	Timestamp time.Time `json:"timestamp"`
	RunID     string    `json:"run_id"`
	// CurrentNode is the last completed node; NextNode where the run continues
	// ("" once it finished). Incoming is the edge taken to NextNode.
	CurrentNode    string         `json:"current_node"`
	NextNode       string         `json:"next_node"`
	Incoming       *EdgeKey       `json:"incoming_edge,omitempty"`
	CompletedNodes []string       `json:"completed_nodes"`
	NodeRetries    Counts         `json:"node_retries"`
	Context        map[string]any `json:"context"`
	Logs           []string       `json:"logs"`

	State         string `json:"state"`
	FailureReason string `json:"failure_reason,omitempty"`

	// Path lists the top-level node visits of the whole run, in order.
	Path       []string          `json:"path"`
	Attempts   Counts            `json:"attempts"`
	Visits     Counts            `json:"visits"`
	StageIndex Counts            `json:"stage_index"`
	GoalGates  map[string]Status `json:"goal_gate_outcomes"`
	History    []fidelity.Stage  `json:"history"`
	// EventSeq is the seq of the event that committed this state.
	EventSeq int64 `json:"event_seq"`
	Usage    Usage `json:"usage"`
	Tally
	StageRoot   string    `json:"stage_root"` // stage directories' parent, relative to the run directory
	StartedAt   time.Time `json:"started_at"`
	GraphName   string    `json:"graph_name"`
	GraphFile   string    `json:"graph_file"`
	GraphSHA256 string    `json:"graph_sha256"`
	// Branches are the parallel branches that finished inside NextNode (a
	// top-level parallel node) before the run stopped: a resume takes their
	// results instead of running them again.
	Branches []FinishedBranch `json:"finished_branches,omitempty"`
	// JournalOffset is where in events.jsonl the records after this
	// snapshot begin (only in checkpoint.json).
	JournalOffset int64 `json:"journal_offset,omitempty"`
	// GraphDOT is the pipeline source. Checkpoints do not carry it (it is in
	// SourceFile, checked against GraphSHA256); LoadCheckpoint fills it in.
	// Checkpoints of earlier versions embed it.
	GraphDOT string `json:"graph_dot,omitempty"`
}

// Counts maps node ids to a number. It encodes without reflection, keys
// sorted like encoding/json's.
type Counts map[string]int

// MarshalJSON writes the object with sorted keys, like encoding/json.
func (c Counts) MarshalJSON() ([]byte, error) {
	if c == nil {
		return []byte("null"), nil
	}
	return appendCounts(make([]byte, 0, 2+24*len(c)), c), nil
}

// appendCounts appends m as a JSON object with sorted keys.
func appendCounts(b []byte, m map[string]int) []byte {
	if len(m) == 1 { // a journal record's usual count: no sorting to do
		for k, v := range m {
			b = append(b, '{')
			b = appendJSONString(b, k)
			b = append(b, ':')
			b = strconv.AppendInt(b, int64(v), 10)
			return append(b, '}')
		}
	}
	keys := slices.Sorted(maps.Keys(m))
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		b = strconv.AppendInt(b, int64(m[k]), 10)
	}
	return append(b, '}')
}

// EdgeKey names an edge by its endpoints and its position among the
// source's outgoing edges (parallel edges between two nodes are allowed).
type EdgeKey struct {
	From  string `json:"from"`
	To    string `json:"to"`
	Index int    `json:"index"`
}

// Manifest describes a run (spec §5.6).
type Manifest struct {
	RunID     string    `json:"run_id"`
	Name      string    `json:"name"`
	Goal      string    `json:"goal"`
	GraphFile string    `json:"graph_file"`
	StartedAt time.Time `json:"started_at"`
}

// maxCheckpoint bounds the checkpoint file a resume reads: far above what a
// run writes, but a child run's checkpoint sits in a stage directory agents
// can reach.
const maxCheckpoint = 256 << 20

// LoadCheckpoint returns the state of the run in logsRoot as of its last
// commit: the snapshot in checkpoint.json with the commits journaled after
// it in events.jsonl applied (read only: a torn last record is skipped,
// not cut). Files are read as regular files, never through a symbolic link.
func LoadCheckpoint(logsRoot string) (*Checkpoint, error) {
	cp, err := LoadState(logsRoot)
	if err != nil {
		return nil, err
	}
	return withSource(logsRoot, cp)
}

// LoadState is LoadCheckpoint without the pipeline source (GraphDOT is
// empty): what a status page needs, read on every request.
func LoadState(logsRoot string) (*Checkpoint, error) {
	st, err := replayJournal(readOnlyJournal(logsRoot))
	if err != nil {
		return nil, err
	}
	st.cp.JournalOffset = 0
	return st.cp, nil
}

// StateOf is LoadState for a journal kept elsewhere than the run's
// directory (Config.Journal): the run's state as of its last commit,
// without its source. An error wrapping fs.ErrNotExist says the journal
// holds no snapshot yet (the run never started).
func StateOf(j Journal) (*Checkpoint, error) {
	st, err := replayJournal(j)
	if err != nil {
		return nil, err
	}
	st.cp.JournalOffset = 0
	return st.cp, nil
}

// ended reports whether the run reached its end (succeeded or failed).
func (cp *Checkpoint) ended() bool { return cp.State == StateSuccess || cp.State == StateFail }

// withSource fills in cp.GraphDOT from the run's SourceFile.
func withSource(logsRoot string, cp *Checkpoint) (*Checkpoint, error) {
	if cp.GraphDOT != "" {
		return cp, nil
	}
	src, err := loadSource(logsRoot, cp.GraphSHA256)
	if err != nil {
		return nil, err
	}
	cp.GraphDOT = string(src)
	return cp, nil
}

// clone copies cp deeply enough that changing either copy's lists and maps
// leaves the other alone (context values are never changed in place).
func (cp *Checkpoint) clone() *Checkpoint {
	c := *cp
	c.CompletedNodes = append([]string{}, cp.CompletedNodes...)
	c.Path = append([]string{}, cp.Path...)
	c.Logs = append([]string{}, cp.Logs...)
	c.History = append([]fidelity.Stage{}, cp.History...)
	c.Branches = slices.Clone(cp.Branches)
	c.NodeRetries = cloneCounts(cp.NodeRetries)
	c.Attempts = cloneCounts(cp.Attempts)
	c.Visits = cloneCounts(cp.Visits)
	c.StageIndex = cloneCounts(cp.StageIndex)
	c.GoalGates = maps.Clone(cp.GoalGates)
	if c.GoalGates == nil {
		c.GoalGates = map[string]Status{}
	}
	c.Context = maps.Clone(cp.Context)
	if c.Context == nil {
		c.Context = map[string]any{}
	}
	if cp.Incoming != nil {
		in := *cp.Incoming
		c.Incoming = &in
	}
	return &c
}

func cloneCounts(c Counts) Counts {
	if c == nil {
		return Counts{}
	}
	return maps.Clone(c)
}

// NoRunError says a directory holds no pipeline run (no checkpoint); it
// matches fs.ErrNotExist.
type NoRunError struct{ Dir string }

func (e *NoRunError) Error() string {
	return fmt.Sprintf("no checkpoint at %s: is %s a pipeline run directory?", filepath.Join(e.Dir, CheckpointFile), e.Dir)
}

// Is makes errors.Is(err, fs.ErrNotExist) hold.
func (e *NoRunError) Is(target error) bool { return target == fs.ErrNotExist }

// readSnapshot reads {logsRoot}/checkpoint.json.
func readSnapshot(logsRoot string) (*Checkpoint, error) {
	path := filepath.Join(logsRoot, CheckpointFile)
	data, err := readStageFile(path, maxCheckpoint)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &NoRunError{Dir: logsRoot}
	}
	if err != nil {
		return nil, fmt.Errorf("read checkpoint: %w", err)
	}
	var cp Checkpoint
	if err := json.Unmarshal(data, &cp); err != nil {
		return nil, fmt.Errorf("checkpoint %s is not valid JSON: %w", path, err)
	}
	if cp.Version != checkpointVersion {
		return nil, fmt.Errorf("checkpoint %s has version %d, this nanohost reads version %d", path, cp.Version, checkpointVersion)
	}
	return &cp, nil
}

// loadSource reads the run's SourceFile and checks it is the source the
// checkpoint was written for.
func loadSource(logsRoot, sha string) ([]byte, error) {
	path := filepath.Join(logsRoot, SourceFile)
	src, err := readStageFile(path, maxSource)
	if err != nil {
		return nil, fmt.Errorf("read the run's pipeline source: %w", err)
	}
	sum := sha256.Sum256(src)
	if got := hex.EncodeToString(sum[:]); got != sha {
		return nil, fmt.Errorf("%s has sha256 %.12s…, but the checkpoint was written for %.12s…: the file was changed", path, got, sha)
	}
	return src, nil
}

// writeFileAtomic replaces path with data so that a reader (or a crash)
// sees either the old file or the new one, never a torn mix: write a temp
// file in the same directory, fsync it, rename it over path, fsync the
// directory (the fsyncs only when durable is set). dir, when not nil, is
// that directory already open (a run keeps its own open, saving an open
// per checkpoint).
func writeFileAtomic(path string, data []byte, durable bool, dir *os.File) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("create temp file for %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	if durable {
		if err := tmp.Sync(); err != nil {
			tmp.Close()
			return fmt.Errorf("sync %s: %w", tmp.Name(), err)
		}
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("replace %s: %w", path, err)
	}
	if !durable {
		return nil
	}
	if dir != nil {
		if err := dir.Sync(); err != nil {
			return fmt.Errorf("sync %s: %w", dir.Name(), err)
		}
		return nil
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
