package changes

import (
	"runtime"
	"time"
)

// Limits bound what recording a stage's changes may cost.
type Limits struct {
	// MaxFiles is the most workspace entries a snapshot holds; a larger
	// workspace gets no change record (the stage says why).
	MaxFiles int
	// MaxDepth is the deepest directory level walked; deeper entries are
	// left out.
	MaxDepth int
	// MaxHashBytes: larger files are not read; they count as changed when
	// their size, times or inode change.
	MaxHashBytes int64
	// MaxTextBytes: larger files are listed with their sizes but not diffed
	// (nor kept in the object store).
	MaxTextBytes int64
	// MaxFileDiff bounds one file's diff in changes.diff (whole hunks are
	// kept; the file is marked truncated).
	MaxFileDiff int
	// MaxStageDiff bounds a stage's changes.diff; files past it are listed
	// without a diff.
	MaxStageDiff int
	// Fresh is how recent the last snapshot of a workspace must be to serve
	// as the next stage's "before" without a new walk: the moment between
	// two stages of a run. Changes made in it count to the next stage.
	Fresh time.Duration
	// Workers walk a workspace in parallel.
	Workers int
}

// DefaultLimits are the limits a zero field takes.
var DefaultLimits = Limits{
	MaxFiles:     200_000,
	MaxDepth:     128,
	MaxHashBytes: 256 << 20,
	MaxTextBytes: 1 << 20,
	MaxFileDiff:  256 << 10,
	MaxStageDiff: 8 << 20,
	Fresh:        2 * time.Second,
	Workers:      min(4, runtime.GOMAXPROCS(0)),
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	if l.MaxFiles <= 0 {
		l.MaxFiles = d.MaxFiles
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = d.MaxDepth
	}
	if l.MaxHashBytes <= 0 {
		l.MaxHashBytes = d.MaxHashBytes
	}
	if l.MaxTextBytes <= 0 {
		l.MaxTextBytes = d.MaxTextBytes
	}
	if l.MaxTextBytes > l.MaxHashBytes {
		l.MaxTextBytes = l.MaxHashBytes
	}
	if l.MaxFileDiff <= 0 {
		l.MaxFileDiff = d.MaxFileDiff
	}
	if l.MaxStageDiff <= 0 {
		l.MaxStageDiff = d.MaxStageDiff
	}
	if l.Fresh == 0 {
		l.Fresh = d.Fresh
	}
	if l.Workers <= 0 {
		l.Workers = max(1, d.Workers)
	}
	return l
}
