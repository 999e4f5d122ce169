package workspace

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"io"
	"os"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
)

// indexMagic starts an index file; the format is ours, plain varints (gob
// took a tenth of a stage's commit for a 10,000-file tree).
const indexMagic = "nanohost index 2\n"

var errBadIndex = errors.New("not a workspace index")

func loadIndex(path string) (*index, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if !bytes.HasPrefix(data, []byte(indexMagic)) {
		return loadGobIndex(data) // written by an earlier version
	}
	d := indexDecoder{buf: data[len(indexMagic):]}
	ix := &index{Taken: d.varint()}
	n := d.uvarint()
	if n > uint64(len(d.buf)) {
		return nil, errBadIndex
	}
	ix.Files = make(map[string]entry, n)
	for range n {
		p := d.str()
		e := entry{Mode: filemode.FileMode(d.uvarint())}
		copy(e.Hash[:], d.bytes(len(e.Hash)))
		e.Size, e.Mtime, e.Ctime, e.Ino = d.varint(), d.varint(), d.varint(), d.uvarint()
		ix.Files[p] = e
	}
	if n := d.uvarint(); n > 0 && n <= uint64(len(d.buf)) {
		ix.Dirs = make(map[string]plumbing.Hash, n)
		for range n {
			p := d.str()
			var h plumbing.Hash
			copy(h[:], d.bytes(len(h)))
			ix.Dirs[p] = h
		}
	}
	if d.err != nil || string(d.bytes(4)) != "end\n" {
		return nil, errBadIndex
	}
	return ix, nil
}

func loadGobIndex(data []byte) (*index, error) {
	var ix index
	if err := gob.NewDecoder(bytes.NewReader(data)).Decode(&ix); err != nil {
		return nil, err
	}
	if ix.Files == nil {
		ix.Files = map[string]entry{}
	}
	return &ix, nil
}

func saveIndex(path string, ix *index) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 256<<10)
	w.WriteString(indexMagic)
	var num [binary.MaxVarintLen64]byte
	uv := func(v uint64) { w.Write(binary.AppendUvarint(num[:0], v)) }
	sv := func(v int64) { w.Write(binary.AppendVarint(num[:0], v)) }
	str := func(s string) { uv(uint64(len(s))); w.WriteString(s) }
	sv(ix.Taken)
	uv(uint64(len(ix.Files)))
	for p, e := range ix.Files {
		str(p)
		uv(uint64(e.Mode))
		w.Write(e.Hash[:])
		sv(e.Size)
		sv(e.Mtime)
		sv(e.Ctime)
		uv(e.Ino)
	}
	uv(uint64(len(ix.Dirs)))
	for p, h := range ix.Dirs {
		str(p)
		w.Write(h[:])
	}
	w.WriteString("end\n")
	err = w.Flush()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// indexDecoder reads an index's varints; the first error sticks.
type indexDecoder struct {
	buf []byte
	err error
}

func (d *indexDecoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.buf)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.buf = d.buf[n:]
	return v
}

func (d *indexDecoder) varint() int64 {
	v, n := binary.Varint(d.buf)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.buf = d.buf[n:]
	return v
}

func (d *indexDecoder) bytes(n int) []byte {
	if n > len(d.buf) {
		d.fail()
		return nil
	}
	b := d.buf[:n]
	d.buf = d.buf[n:]
	return b
}

func (d *indexDecoder) str() string {
	n := d.uvarint()
	if n > uint64(len(d.buf)) {
		d.fail()
		return ""
	}
	return string(d.bytes(int(n)))
}

func (d *indexDecoder) fail() {
	if d.err == nil {
		d.err = io.ErrUnexpectedEOF
	}
	d.buf = nil
}
