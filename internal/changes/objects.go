package changes

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// objects is a content-addressed directory of file contents, named by
// their SHA-256 (objects/ab/cdef…), written once and never changed: a blob
// can be hard-linked into a run's record and read by anyone without locks.
type objects struct{ dir string }

func (o objects) path(sum [32]byte) string {
	h := hex.EncodeToString(sum[:])
	return filepath.Join(o.dir, h[:2], h[2:])
}

// makeShards creates the 256 directories blobs go into, once, so storing
// a blob is a create and a rename.
func (o objects) makeShards() error {
	for i := range 256 {
		if err := os.MkdirAll(filepath.Join(o.dir, fmt.Sprintf("%02x", i)), 0o700); err != nil {
			return err
		}
	}
	return nil
}

// put stores data under sum unless it is there already (the shards exist).
func (o objects) put(sum [32]byte, data []byte) error {
	p := o.path(sum)
	if _, err := os.Lstat(p); err == nil {
		return nil
	}
	return writeAtomicMode(p, data, 0) // CreateTemp's 0600 is right
}

// read returns the blob sum, at most limit bytes of it.
func (o objects) read(sum [32]byte, limit int64) ([]byte, error) {
	return readBounded(o.path(sum), limit)
}

// linkFrom makes src's blob sum one of o's too (the shards exist): a hard
// link (blobs never change), or a copy across file systems.
func (o objects) linkFrom(src objects, sum [32]byte) error {
	dst := o.path(sum)
	err := os.Link(src.path(sum), dst)
	if err == nil || errors.Is(err, fs.ErrExist) {
		return nil
	}
	data, rerr := src.read(sum, 1<<40)
	if rerr != nil {
		return rerr
	}
	if _, err := os.Lstat(dst); err == nil {
		return nil
	}
	return writeAtomicMode(dst, data, 0)
}

func (o objects) remove(sum [32]byte) {
	os.Remove(o.path(sum))
}
