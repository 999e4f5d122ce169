package changes

import (
	"crypto/sha256"
	"encoding/hex"
)

// kind is what a workspace entry is. Directories are not entries: a
// change set lists files, as a diff does.
type kind uint8

const (
	kindFile    kind = 1
	kindSymlink kind = 2
	kindSpecial kind = 3 // a FIFO, socket or device: listed, never opened
)

func (k kind) String() string {
	switch k {
	case kindSymlink:
		return "symlink"
	case kindSpecial:
		return "special"
	}
	return "file"
}

// Entry flags.
const (
	flagHashed     uint8 = 1 << iota // sum is the content's SHA-256 (a symlink's: its target's)
	flagText                         // a text file of at most MaxTextBytes whose content is in the object store
	flagRacy                         // changed within a timestamp tick of the scan: read again next time
	flagUnreadable                   // could not be read (permissions, vanished): compared by metadata only
)

// entry is one path of a snapshot.
type entry struct {
	kind  kind
	flags uint8
	mode  uint32 // st_mode: type and permission bits
	size  int64
	mtime int64 // nanoseconds
	ctime int64
	ino   uint64
	dev   uint64
	sum   [sha256.Size]byte
	// target is a symbolic link's target (bounded), never followed.
	target string
}

func (e *entry) has(f uint8) bool { return e.flags&f != 0 }

// sameMeta reports whether the metadata the prefilter trusts is unchanged:
// then the content is taken to be unchanged too (unless the entry was racy).
// ctime is part of it because nobody can set it: an agent that restores a
// file's mtime after changing it still moves its ctime.
func (e *entry) sameMeta(o *entry) bool {
	return e.kind == o.kind && e.mode == o.mode && e.size == o.size && e.mtime == o.mtime &&
		e.ctime == o.ctime && e.ino == o.ino && e.dev == o.dev
}

// sameContent reports whether two entries of a path hold the same thing:
// same kind and permissions, and the same hash when both were hashed, else
// the same metadata.
func (e *entry) sameContent(o *entry) bool {
	if e.kind != o.kind || e.perm() != o.perm() {
		return false
	}
	if e.has(flagHashed) && o.has(flagHashed) {
		return e.sum == o.sum
	}
	return e.sameMeta(o)
}

// perm is the mode bits a diff shows (git's 100644/100755/120000 style).
func (e *entry) perm() uint32 { return e.mode & 0o7777 }

func (e *entry) sumHex() string { return hex.EncodeToString(e.sum[:]) }

// gitMode is the mode as a diff header shows it.
func (e *entry) gitMode() string {
	switch e.kind {
	case kindSymlink:
		return "120000"
	case kindSpecial:
		return "0"
	}
	if e.mode&0o111 != 0 {
		return "100755"
	}
	return "100644"
}

// snapshot is a workspace's entries at one moment. Snapshots and their
// entries are never changed once built, so in-flight stages can hold them
// and later snapshots share the entries that did not change.
type snapshot struct {
	gen     uint64
	entries map[string]*entry
}

func emptySnapshot() *snapshot { return &snapshot{entries: map[string]*entry{}} }

// delta is one path that differs between two snapshots; old or new is nil
// when the path is absent on that side.
type delta struct {
	path     string
	old, new *entry
}

// compare lists the paths whose content differs between a and b, in no
// particular order.
func compare(a, b *snapshot) []delta {
	var out []delta
	for p, ne := range b.entries {
		oe, ok := a.entries[p]
		switch {
		case !ok:
			out = append(out, delta{path: p, new: ne})
		case !oe.sameContent(ne):
			out = append(out, delta{path: p, old: oe, new: ne})
		}
	}
	for p, oe := range a.entries {
		if _, ok := b.entries[p]; !ok {
			out = append(out, delta{path: p, old: oe})
		}
	}
	return out
}
