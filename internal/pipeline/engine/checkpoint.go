package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"nanohost/internal/pipeline/fidelity"
)

// File names inside a run directory.
const (
	CheckpointFile = "checkpoint.json"
	ManifestFile   = "manifest.json"
	EventsFile     = "events.jsonl"
	// SourceFile holds the DOT source the run started from, written once
	// (a checkpoint is rewritten after every node and names it by sha256).
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

// Checkpoint is the run state written after every node (spec §5.3, §5.6),
// plus everything a resume needs.
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
	Path        []string          `json:"path"`
	Attempts    Counts            `json:"attempts"`
	Visits      Counts            `json:"visits"`
	StageIndex  Counts            `json:"stage_index"`
	GoalGates   map[string]Status `json:"goal_gate_outcomes"`
	History     []fidelity.Stage  `json:"history"`
	EventSeq    int64             `json:"event_seq"`
	Usage       Usage             `json:"usage"`
	Steps       int               `json:"steps"`
	Restarts    int               `json:"restarts"`
	StageRoot   string            `json:"stage_root"` // stage directories' parent, relative to the run directory
	StartedAt   time.Time         `json:"started_at"`
	GraphName   string            `json:"graph_name"`
	GraphFile   string            `json:"graph_file"`
	GraphSHA256 string            `json:"graph_sha256"`
	// GraphDOT is the pipeline source. Checkpoints do not carry it (it is in
	// SourceFile, checked against GraphSHA256); LoadCheckpoint fills it in.
	// Checkpoints of earlier versions embed it.
	GraphDOT string `json:"graph_dot,omitempty"`
}

// Counts maps node ids to a number. It encodes without reflection: a
// checkpoint holds several of these with an entry per visited node, and
// it is written after every node.
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
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
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

// appendCountsInOrder appends m as a JSON object whose keys come in the
// order of keys (those m lacks are skipped): no sorting and no allocation,
// for the per-node counts every checkpoint carries.
func appendCountsInOrder(b []byte, m map[string]int, keys []string) []byte {
	b = append(b, '{')
	first := true
	for _, k := range keys {
		v, ok := m[k]
		if !ok {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendJSONString(b, k)
		b = append(b, ':')
		b = strconv.AppendInt(b, int64(v), 10)
	}
	return append(b, '}')
}

// appendStrings appends ss as a JSON array ([] for nil).
func appendStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, s)
	}
	return append(b, ']')
}

// appendJSONString appends s as a JSON string; node ids are identifiers,
// so the fast path (nothing to escape) is the usual one.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
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
// run writes (its lists grow by a node id per step, its history is bounded),
// but a child run's checkpoint sits in a stage directory agents can reach.
const maxCheckpoint = 256 << 20

// LoadCheckpoint reads {logsRoot}/checkpoint.json (a regular file, never
// through a symbolic link).
func LoadCheckpoint(logsRoot string) (*Checkpoint, error) {
	path := filepath.Join(logsRoot, CheckpointFile)
	data, err := readStageFile(path, maxCheckpoint)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no checkpoint at %s: is %s a pipeline run directory?", path, logsRoot)
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
	if cp.GraphDOT == "" {
		src, err := loadSource(logsRoot, cp.GraphSHA256)
		if err != nil {
			return nil, err
		}
		cp.GraphDOT = string(src)
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
