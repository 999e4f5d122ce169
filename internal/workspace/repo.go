package workspace

import (
	"bytes"
	"compress/zlib"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// repo is a git directory the host owns: objects and refs written with
// go-git, read by the git command only with this directory as --git-dir.
type repo struct {
	gitDir string
	st     *filesystem.Storage
	mu     sync.Mutex             // go-git's storage is not safe for concurrent writers
	trees  map[plumbing.Hash]bool // trees known to be stored (mu held)
}

// openRepo opens gitDir, creating a bare repository there if it has none.
func openRepo(gitDir string) (*repo, error) {
	if _, err := os.Stat(filepath.Join(gitDir, "HEAD")); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(gitDir), 0o700); err != nil {
			return nil, err
		}
		if _, err := git.PlainInit(gitDir, true); err != nil && !errors.Is(err, git.ErrRepositoryAlreadyExists) {
			return nil, fmt.Errorf("create the repository %s: %w", gitDir, err)
		}
	}
	// a few packs stay open: go-git otherwise opens and parses the pack
	// again for every object it reads (a checkout reads thousands)
	st := filesystem.NewStorageWithOptions(osfs.New(gitDir), cache.NewObjectLRU(16<<20), filesystem.Options{MaxOpenDescriptors: 4})
	return &repo{gitDir: gitDir, st: st}, nil
}

func (r *repo) putBlob(data []byte) (plumbing.Hash, error) {
	h := plumbing.ComputeHash(plumbing.BlobObject, data)
	return h, r.putObject(plumbing.BlobObject, h, data)
}

func (r *repo) putObject(t plumbing.ObjectType, h plumbing.Hash, data []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t == plumbing.TreeObject && r.trees[h] {
		return nil
	}
	if err := r.writeLoose(t, h, data); err != nil {
		return err
	}
	r.known(t, h)
	return nil
}

var zlibWriters = sync.Pool{New: func() any {
	w, _ := zlib.NewWriterLevel(nil, zlib.BestSpeed)
	return w
}}

// writeLoose stores an object as git does, a loose file of the zlib of
// "<type> <size>\0<content>", renamed into place so no reader sees half of
// one. An object already loose is left alone; one already packed is
// written again (git keeps either, and a look in the packs would cost more
// than the write). go-git's own writer costs a compressor's allocation
// and a dozen file system calls per object.
func (r *repo) writeLoose(t plumbing.ObjectType, h plumbing.Hash, data []byte) error {
	hex := h.String()
	dir := filepath.Join(r.gitDir, "objects", hex[:2])
	final := filepath.Join(dir, hex[2:])
	if _, err := os.Lstat(final); err == nil {
		return nil
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	f, err := os.CreateTemp(dir, "tmp_obj_")
	if err != nil {
		return err
	}
	zw := zlibWriters.Get().(*zlib.Writer)
	defer zlibWriters.Put(zw)
	zw.Reset(f)
	_, err = fmt.Fprintf(zw, "%s %d\x00", t, len(data))
	if err == nil {
		_, err = zw.Write(data)
	}
	if err == nil {
		err = zw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), final)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

func (r *repo) known(t plumbing.ObjectType, h plumbing.Hash) {
	if t != plumbing.TreeObject {
		return
	}
	if r.trees == nil || len(r.trees) > 100_000 {
		r.trees = map[plumbing.Hash]bool{}
	}
	r.trees[h] = true
}

// writeTree stores the trees of ix and returns the root's hash. Only the
// directories whose hash ix.Dirs lacks are hashed and stored (all of them
// the first time); ix.Dirs then holds every directory's.
func (r *repo) writeTree(ix *index) (plumbing.Hash, error) {
	if h, ok := ix.Dirs[""]; ok && r.hasTree(h) {
		return h, nil
	}
	if _, ok := ix.Dirs[""]; ok || ix.Dirs == nil {
		ix.Dirs = map[string]plumbing.Hash{} // none, or not in this repository: all again
	}
	type dir struct {
		entries []object.TreeEntry
		subdirs []string
	}
	// the directories there are, and the files of those to hash
	all := map[string]bool{"": true}
	need := map[string]*dir{}
	needs := func(d string) *dir {
		if _, ok := ix.Dirs[d]; ok {
			return nil
		}
		nd := need[d]
		if nd == nil {
			nd = &dir{}
			need[d] = nd
		}
		return nd
	}
	for p, e := range ix.Files {
		d := dirOf(p)
		for a := d; !all[a]; a = dirOf(a) {
			all[a] = true
		}
		if nd := needs(d); nd != nil {
			nd.entries = append(nd.entries, object.TreeEntry{Name: p[len(d)+len(sep(d)):], Mode: e.Mode, Hash: e.Hash})
		}
	}
	for d := range ix.Dirs {
		if !all[d] {
			delete(ix.Dirs, d)
		}
	}
	for d := range all {
		needs(d)
	}
	for d := range all {
		if d == "" {
			continue
		}
		if nd := need[dirOf(d)]; nd != nil {
			nd.subdirs = append(nd.subdirs, d)
		}
	}
	// deepest first, so a directory's subdirectories are hashed before it
	order := make([]string, 0, len(need))
	for d := range need {
		order = append(order, d)
	}
	slices.SortFunc(order, func(a, b string) int { return depth(b) - depth(a) })
	var buf []byte
	for _, d := range order {
		nd := need[d]
		for _, sub := range nd.subdirs {
			nd.entries = append(nd.entries, object.TreeEntry{Name: sub[len(d)+len(sep(d)):], Mode: filemode.Dir, Hash: ix.Dirs[sub]})
		}
		slices.SortFunc(nd.entries, func(a, b object.TreeEntry) int { return strings.Compare(sortName(a), sortName(b)) })
		buf = buf[:0]
		for _, e := range nd.entries {
			buf = strconv.AppendUint(buf, uint64(e.Mode), 8)
			buf = append(buf, ' ')
			buf = append(buf, e.Name...)
			buf = append(buf, 0)
			buf = append(buf, e.Hash[:]...)
		}
		h := plumbing.ComputeHash(plumbing.TreeObject, buf)
		if err := r.putObject(plumbing.TreeObject, h, buf); err != nil {
			return plumbing.ZeroHash, err
		}
		ix.Dirs[d] = h
	}
	return ix.Dirs[""], nil
}

// sep is the separator after directory d in its files' paths.
func sep(d string) string {
	if d == "" {
		return ""
	}
	return "/"
}

func depth(d string) int {
	if d == "" {
		return 0
	}
	return strings.Count(d, "/") + 1
}

// hasTree says tree h is stored.
func (r *repo) hasTree(h plumbing.Hash) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.trees[h] {
		return true
	}
	if r.st.HasEncodedObject(h) == nil {
		r.known(plumbing.TreeObject, h)
		return true
	}
	return false
}

// sortName is git's tree order: a directory sorts as if its name ended in "/".
func sortName(e object.TreeEntry) string {
	if e.Mode == filemode.Dir {
		return e.Name + "/"
	}
	return e.Name
}

// treeFiles lists the files of a tree by path.
func (r *repo) treeFiles(tree plumbing.Hash) (map[string]object.TreeEntry, error) {
	files, _, err := r.treeListing(tree)
	return files, err
}

// treeListing lists the files of a tree by path, and the hashes of its
// directories ("" the root) that hold only files (a submodule is no file).
func (r *repo) treeListing(tree plumbing.Hash) (map[string]object.TreeEntry, map[string]plumbing.Hash, error) {
	files := map[string]object.TreeEntry{}
	dirs := map[string]plumbing.Hash{}
	var walk func(h plumbing.Hash, dir string) (bool, error)
	walk = func(h plumbing.Hash, dir string) (bool, error) {
		r.mu.Lock()
		t, err := object.GetTree(r.st, h)
		r.mu.Unlock()
		if err != nil {
			return false, err
		}
		onlyFiles := len(t.Entries) > 0 // an empty tree is no directory of files
		for _, e := range t.Entries {
			p := dir + sep(dir) + e.Name
			switch {
			case e.Mode == filemode.Dir:
				ok, err := walk(e.Hash, p)
				if err != nil {
					return false, err
				}
				onlyFiles = onlyFiles && ok
			case e.Mode == filemode.Submodule:
				onlyFiles = false
			default:
				files[p] = e
			}
		}
		if onlyFiles {
			dirs[dir] = h
		}
		return onlyFiles, nil
	}
	_, err := walk(tree, "")
	return files, dirs, err
}

// blob reads a blob's content.
func (r *repo) blob(h plumbing.Hash) ([]byte, error) {
	r.mu.Lock()
	o, err := r.st.EncodedObject(plumbing.BlobObject, h)
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	rd, err := o.Reader()
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	return io.ReadAll(rd)
}

func (r *repo) commit(h plumbing.Hash) (*object.Commit, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return object.GetCommit(r.st, h)
}

// writeCommit stores a commit of tree with parents and returns its hash.
func (r *repo) writeCommit(tree plumbing.Hash, parents []plumbing.Hash, msg string, author object.Signature) (plumbing.Hash, error) {
	c := &object.Commit{Author: author, Committer: author, Message: msg, TreeHash: tree, ParentHashes: parents}
	var o plumbing.MemoryObject
	if err := c.Encode(&o); err != nil {
		return plumbing.ZeroHash, err
	}
	rd, _ := o.Reader()
	data, _ := io.ReadAll(rd)
	return o.Hash(), r.putObject(plumbing.CommitObject, o.Hash(), data)
}

// ref is the commit a reference points at (zero: none).
func (r *repo) ref(name plumbing.ReferenceName) (plumbing.Hash, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ref, err := r.st.Reference(name)
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		return plumbing.ZeroHash, nil
	}
	if err != nil {
		return plumbing.ZeroHash, err
	}
	return ref.Hash(), nil
}

// setRef points name at h if it still points at old (zero: must not exist).
func (r *repo) setRef(name plumbing.ReferenceName, h, old plumbing.Hash) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	ref := plumbing.NewHashReference(name, h)
	if old.IsZero() {
		if _, err := r.st.Reference(name); err == nil {
			return fmt.Errorf("%s exists already", name)
		}
		return r.st.SetReference(ref)
	}
	return r.st.CheckAndSetReference(ref, plumbing.NewHashReference(name, old))
}

func (r *repo) removeRef(name plumbing.ReferenceName) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st.RemoveReference(name)
}

// refs lists the references under prefix.
func (r *repo) refs(prefix string) (map[plumbing.ReferenceName]plumbing.Hash, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	it, err := r.st.IterReferences()
	if err != nil {
		return nil, err
	}
	out := map[plumbing.ReferenceName]plumbing.Hash{}
	err = it.ForEach(func(ref *plumbing.Reference) error {
		if strings.HasPrefix(ref.Name().String(), prefix) && ref.Type() == plumbing.HashReference {
			out[ref.Name()] = ref.Hash()
		}
		return nil
	})
	return out, err
}

// gitEnv is the environment of every git command: no system or global
// configuration, no prompt, no replace objects, no attributes from outside.
func gitEnv(home string) []string {
	return []string{
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME=" + home, "XDG_CONFIG_HOME=" + home,
		"GIT_TERMINAL_PROMPT=0", "GIT_NO_REPLACE_OBJECTS=1", "GIT_ATTR_NOSYSTEM=1", "GIT_OPTIONAL_LOCKS=0",
		"PATH=/usr/bin:/bin", "LC_ALL=C",
	}
}

// gitSafety are the -c settings of every git command: hooks and fsmonitor
// off, no attributes or excludes files, no external diff or pager.
var gitSafety = []string{
	"-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "core.attributesFile=/dev/null",
	"-c", "core.excludesFile=/dev/null", "-c", "diff.external=", "-c", "core.pager=cat", "-c", "core.sshCommand=false",
	"-c", "protocol.ext.allow=never", "-c", "safe.directory=*",
}

// git runs the git command against the host's git directory only (no
// working tree: git never reads one an agent wrote).
func (r *repo) git(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	return r.gitEnv(ctx, nil, stdin, args...)
}

// gitEnv is git with extra environment (a remote's credentials).
func (r *repo) gitEnv(ctx context.Context, extra []string, stdin []byte, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	full := append(append([]string{}, gitSafety...), append([]string{"--git-dir=" + r.gitDir, "--no-replace-objects"}, args...)...)
	cmd := exec.CommandContext(ctx, "git", full...)
	cmd.Env = append(gitEnv(r.gitDir), extra...)
	cmd.Dir = r.gitDir
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("git %s: %w: %s", args[0], err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
