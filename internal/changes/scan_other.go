//go:build !linux

package changes

import (
	"errors"
	"time"
)

const racyWindow = 100 * time.Millisecond

var errTooManyFiles = errors.New("too many files")

type scanStats struct {
	Entries, Hashed, Skipped int
	Watched                  bool
}

// scan is Linux-only: it relies on openat2 and the Linux stat layout.
func scan(root string, prev *snapshot, objs objects, lim Limits, watch func(string) bool) (*snapshot, scanStats, error) {
	return nil, scanStats{}, errors.New("recording workspace changes is supported on Linux only")
}
