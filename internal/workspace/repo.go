package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
	if r.st.HasEncodedObject(h) == nil {
		r.known(t, h)
		return nil
	}
	o := r.st.NewEncodedObject()
	o.SetType(t)
	o.SetSize(int64(len(data)))
	w, err := o.Writer()
	if err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		return err
	}
	w.Close()
	if _, err = r.st.SetEncodedObject(o); err == nil {
		r.known(t, h)
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

// writeTree stores the trees of ix and returns the root's hash.
func (r *repo) writeTree(ix *index) (plumbing.Hash, error) {
	type dir struct {
		entries []object.TreeEntry
		subdirs map[string]*dir
	}
	root := &dir{subdirs: map[string]*dir{}}
	var at func(d *dir, parts []string) *dir
	at = func(d *dir, parts []string) *dir {
		for _, p := range parts {
			sub, ok := d.subdirs[p]
			if !ok {
				sub = &dir{subdirs: map[string]*dir{}}
				d.subdirs[p] = sub
			}
			d = sub
		}
		return d
	}
	for p, e := range ix.Files {
		parts := strings.Split(p, "/")
		d := at(root, parts[:len(parts)-1])
		d.entries = append(d.entries, object.TreeEntry{Name: parts[len(parts)-1], Mode: e.Mode, Hash: e.Hash})
	}
	var write func(d *dir) (plumbing.Hash, error)
	write = func(d *dir) (plumbing.Hash, error) {
		for name, sub := range d.subdirs {
			h, err := write(sub)
			if err != nil {
				return h, err
			}
			d.entries = append(d.entries, object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h})
		}
		slices.SortFunc(d.entries, func(a, b object.TreeEntry) int { return strings.Compare(sortName(a), sortName(b)) })
		var buf bytes.Buffer
		for _, e := range d.entries {
			fmt.Fprintf(&buf, "%o %s\x00", e.Mode, e.Name)
			buf.Write(e.Hash[:])
		}
		h := plumbing.ComputeHash(plumbing.TreeObject, buf.Bytes())
		return h, r.putObject(plumbing.TreeObject, h, buf.Bytes())
	}
	return write(root)
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
	out := map[string]object.TreeEntry{}
	var walk func(h plumbing.Hash, prefix string) error
	walk = func(h plumbing.Hash, prefix string) error {
		r.mu.Lock()
		t, err := object.GetTree(r.st, h)
		r.mu.Unlock()
		if err != nil {
			return err
		}
		for _, e := range t.Entries {
			p := prefix + e.Name
			switch {
			case e.Mode == filemode.Dir:
				if err := walk(e.Hash, p+"/"); err != nil {
					return err
				}
			case e.Mode == filemode.Submodule:
			default:
				out[p] = e
			}
		}
		return nil
	}
	return out, walk(tree, "")
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
	r.mu.Lock()
	defer r.mu.Unlock()
	o := r.st.NewEncodedObject()
	if err := c.Encode(o); err != nil {
		return plumbing.ZeroHash, err
	}
	return r.st.SetEncodedObject(o)
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
