package changes

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// The index file keeps a workspace's last snapshot between processes, so
// a restarted host does not read every file again. It is a cache: an
// unreadable index costs one full read of the workspace, nothing else.
//
// Layout: the magic, the generation (u64), the entry count (u32), then per
// entry: path length (u32) and path, kind, flags, mode (u32), size, mtime,
// ctime (i64), inode, device (u64), the SHA-256, and the link target's
// length (u32) and bytes. Little endian.
const indexMagic = "nanohost-changes-index-1\n"

func encodeIndex(s *snapshot) []byte {
	paths := make([]string, 0, len(s.entries))
	for p := range s.entries {
		paths = append(paths, p)
	}
	slices.Sort(paths) // stable files, for people who diff them
	b := make([]byte, 0, len(indexMagic)+12+len(paths)*110)
	b = append(b, indexMagic...)
	b = binary.LittleEndian.AppendUint64(b, s.gen)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(paths)))
	for _, p := range paths {
		e := s.entries[p]
		b = binary.LittleEndian.AppendUint32(b, uint32(len(p)))
		b = append(b, p...)
		b = append(b, byte(e.kind), e.flags)
		b = binary.LittleEndian.AppendUint32(b, e.mode)
		b = binary.LittleEndian.AppendUint64(b, uint64(e.size))
		b = binary.LittleEndian.AppendUint64(b, uint64(e.mtime))
		b = binary.LittleEndian.AppendUint64(b, uint64(e.ctime))
		b = binary.LittleEndian.AppendUint64(b, e.ino)
		b = binary.LittleEndian.AppendUint64(b, e.dev)
		b = append(b, e.sum[:]...)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(e.target)))
		b = append(b, e.target...)
	}
	return b
}

var errBadIndex = errors.New("not a changes index")

func decodeIndex(b []byte) (*snapshot, error) {
	r := reader{b: b}
	if string(r.bytes(len(indexMagic))) != indexMagic {
		return nil, errBadIndex
	}
	s := &snapshot{gen: r.u64()}
	n := r.u32()
	if r.err != nil || uint64(n) > uint64(len(b)) { // each entry takes bytes: no huge preallocation
		return nil, errBadIndex
	}
	s.entries = make(map[string]*entry, n)
	for range n {
		p := string(r.bytes(int(r.u32())))
		e := &entry{}
		e.kind, e.flags = kind(r.u8()), r.u8()
		e.mode = r.u32()
		e.size, e.mtime, e.ctime = int64(r.u64()), int64(r.u64()), int64(r.u64())
		e.ino, e.dev = r.u64(), r.u64()
		copy(e.sum[:], r.bytes(len(e.sum)))
		e.target = string(r.bytes(int(r.u32())))
		if r.err != nil {
			return nil, r.err
		}
		if e.kind < kindFile || e.kind > kindSpecial || p == "" {
			return nil, fmt.Errorf("%w: entry %q", errBadIndex, p)
		}
		s.entries[p] = e
	}
	if r.err != nil || len(r.b) != 0 {
		return nil, errBadIndex
	}
	return s, nil
}

// reader reads little-endian fields, remembering the first short read.
type reader struct {
	b   []byte
	err error
}

func (r *reader) bytes(n int) []byte {
	if r.err != nil || n < 0 || n > len(r.b) {
		r.err = errBadIndex
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) u8() uint8 {
	if b := r.bytes(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *reader) u32() uint32 {
	if b := r.bytes(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if b := r.bytes(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}
