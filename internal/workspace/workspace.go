package workspace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"golang.org/x/sys/unix"
)

// Options configure a Manager.
type Options struct {
	// StateDir holds the host's repositories and each run's state. It must
	// be outside every directory mounted into a container.
	StateDir string
	// TreesDir holds the runs' working trees (default StateDir/../worktrees).
	TreesDir string
	// Author signs the stage commits (default "nanohost <nanohost@localhost>").
	Author Author
	Limits Limits
	Logger *slog.Logger
	// AgentUID and AgentGID own a run's tree when the host runs as root
	// and root owns the source folder too (agents never run as root).
	AgentUID, AgentGID int
	// Spares is how many spare trees are kept checked out per repository
	// (and owner of its trees), made in the background once a tree of it
	// has been: the next tree made from nothing is one of them renamed into
	// place, with only the files that differ from its commit written (0:
	// none; each costs a tree's disk). Call Close when done.
	Spares int
}

// Author is who commits a run's stages.
type Author struct{ Name, Email string }

// Manager hands out runs' workspaces; one per process.
type Manager struct {
	opts Options
	log  *slog.Logger

	mu    sync.Mutex
	repos map[string]*repo // by git directory

	spares *spares
}

// New checks opts and returns a manager.
func New(opts Options) (*Manager, error) {
	if opts.StateDir == "" {
		return nil, errors.New("workspace: no state directory")
	}
	abs, err := filepath.Abs(opts.StateDir)
	if err != nil {
		return nil, err
	}
	opts.StateDir = abs
	if opts.TreesDir == "" {
		opts.TreesDir = filepath.Join(filepath.Dir(abs), "worktrees")
	}
	if opts.TreesDir, err = filepath.Abs(opts.TreesDir); err != nil {
		return nil, err
	}
	if opts.Author.Name == "" {
		opts.Author.Name = "nanohost"
	}
	if opts.Author.Email == "" {
		opts.Author.Email = "nanohost@localhost"
	}
	opts.Limits = opts.Limits.withDefaults()
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	for _, d := range []string{opts.StateDir, opts.TreesDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
		spread(d)
	}
	log := opts.Logger.With("component", "workspace")
	return &Manager{opts: opts, log: log, repos: map[string]*repo{}, spares: newSpares(opts.TreesDir, opts.Spares, log)}, nil
}

// Source is where a run's base comes from: a folder whose content is
// snapshotted into a repository the host keeps for it (a group's folder),
// or a repository the user owns (the command line's --workspace) whose
// HEAD is the base and which receives the run's branch.
type Source struct {
	// Name keys the host's repository of a folder (the group's folder name).
	Name   string
	Folder string
	// GitDir is a repository the invoking user owns; when set, Folder is
	// not read and the base is GitDir's HEAD.
	GitDir string
	// Remote is the group's repository (groups[].repo, a path or a URL):
	// when set, Folder is not read and the base is Remote's BaseBranch
	// ("": its default branch), fetched into the host's repository. Token
	// authenticates to an http(s) Remote.
	Remote, BaseBranch, Token string
}

func (m *Manager) repo(gitDir string) (*repo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.repos[gitDir]; ok {
		return r, nil
	}
	r, err := openRepo(gitDir)
	if err != nil {
		return nil, err
	}
	m.repos[gitDir] = r
	return r, nil
}

// folderRef is where the host keeps a folder's snapshots.
const folderRef = plumbing.ReferenceName("refs/nanohost/folder")

// BranchPrefix is the namespace of the runs' branches.
const BranchPrefix = "nanohost/"

// Run is one run's workspace: its branch, its base and its working tree.
type Run struct {
	ID     string
	Branch string // nanohost/<short id>
	Base   plumbing.Hash
	Dir    string // the working tree, the agents' /workspace

	m        *Manager
	repo     *repo
	stateDir string

	owner owner

	ref plumbing.ReferenceName // "": refs/heads/<Branch>

	remote, baseBranch string // the group's repository and branch the run started from

	bmu      sync.Mutex
	branches map[string]*Run // parallel branches' workspaces, by Request.Branch

	mu       sync.Mutex
	ix       *index
	inflight int
	errLimit error // set when a stage's content went over Limits
}

// runState is a run's state file: enough to reopen its workspace.
type runState struct {
	RunID  string `json:"run_id"`
	Branch string `json:"branch"`
	Base   string `json:"base"`
	GitDir string `json:"git_dir"`
	Dir    string `json:"dir"`
	// Stage is the stage in flight (its half-work is set aside on resume).
	Stage *StageID `json:"stage,omitempty"`
	// Ref is a parallel branch's ref (a run's own branch is refs/heads/<Branch>).
	Ref string `json:"ref,omitempty"`
	// Remote and BaseBranch: the group's repository the run started from.
	Remote     string `json:"remote,omitempty"`
	BaseBranch string `json:"base_branch,omitempty"`
}

var unsafeRefChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// ShortID is the run id as its branch names it.
func ShortID(runID string) string {
	s := unsafeRefChars.ReplaceAllString(strings.TrimPrefix(runID, "pipeline-"), "-")
	return strings.Trim(strings.ReplaceAll(s, "..", "."), ".-")
}

// Open gives run runID its workspace: the one it has (a resumed run), or a
// new branch at the source's current base, checked out in a fresh tree.
func (m *Manager) Open(ctx context.Context, runID string, src Source) (*Run, error) {
	short := ShortID(runID)
	if short == "" {
		return nil, fmt.Errorf("workspace: run id %q names no branch", runID)
	}
	stateDir := filepath.Join(m.opts.StateDir, "runs", short)
	var rs runState
	if data, err := os.ReadFile(filepath.Join(stateDir, "state.json")); err == nil {
		if err := json.Unmarshal(data, &rs); err != nil {
			return nil, fmt.Errorf("workspace state of run %s: %w", runID, err)
		}
		return m.reopen(runID, stateDir, rs)
	}
	gitDir := src.GitDir
	if gitDir == "" {
		gitDir = m.folderGitDir(src)
	}
	r, err := m.repo(gitDir)
	if err != nil {
		return nil, err
	}
	var base plumbing.Hash
	var baseBranch string
	switch {
	case src.GitDir != "":
		base, err = r.head()
	case src.Remote != "":
		base, baseBranch, err = m.fetchBase(ctx, r, src)
	default:
		base, err = m.snapshotFolder(r, src)
	}
	if err != nil {
		return nil, err
	}
	run := &Run{ID: runID, Branch: BranchPrefix + short, Base: base, Dir: filepath.Join(m.opts.TreesDir, short), m: m, repo: r, stateDir: stateDir,
		owner: m.ownerFor(src.Folder), remote: src.Remote, baseBranch: baseBranch}
	if err := r.setRef(plumbing.NewBranchReferenceName(run.Branch), base, plumbing.ZeroHash); err != nil {
		return nil, fmt.Errorf("create branch %s: %w", run.Branch, err)
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, err
	}
	if err := run.saveState(nil); err != nil {
		return nil, err
	}
	if err := run.materialize(base); err != nil {
		return nil, err
	}
	m.log.Info("run workspace ready", "run", runID, "branch", run.Branch, "base", base.String()[:12], "dir", run.Dir)
	return run, nil
}

func (m *Manager) reopen(runID, stateDir string, rs runState) (*Run, error) {
	r, err := m.repo(rs.GitDir)
	if err != nil {
		return nil, err
	}
	// The tree is this host's: with the state shared by replicas
	// (workspaces.dir), the run may have been worked elsewhere until now.
	dir := rs.Dir
	if filepath.Dir(rs.Dir) != m.opts.TreesDir {
		dir = filepath.Join(m.opts.TreesDir, filepath.Base(rs.Dir))
	}
	run := &Run{ID: runID, Branch: rs.Branch, Base: plumbing.NewHash(rs.Base), Dir: dir, m: m, repo: r, stateDir: stateDir,
		owner: m.ownerFor(dir), ref: plumbing.ReferenceName(rs.Ref), remote: rs.Remote, baseBranch: rs.BaseBranch}
	elsewhere := dir != rs.Dir
	if ix, err := loadIndex(filepath.Join(stateDir, "index")); err == nil && !elsewhere {
		run.ix = ix
	}
	head, err := run.Head()
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(run.Dir); elsewhere || errors.Is(err, os.ErrNotExist) {
		// another replica's run, or a tree removed: check out the head
		// (the half-work of a stage cut off on the other replica stayed
		// in its tree there)
		run.ix = nil
		if err := run.materialize(head); err != nil {
			return nil, err
		}
		if elsewhere {
			m.log.Info("continuing a run worked on another host", "run", runID, "branch", run.Branch, "head", head.String()[:12], "was", rs.Dir)
			if err := run.saveState(rs.Stage); err != nil {
				return nil, err
			}
		}
	}
	return run, nil
}

// snapshotFolder records the folder's content as a commit on folderRef
// (a new one only when it changed) and returns it.
func (m *Manager) snapshotFolder(r *repo, src Source) (plumbing.Hash, error) {
	unlock, err := lockFile(r.gitDir + ".lock")
	if err != nil {
		return plumbing.ZeroHash, err
	}
	defer unlock()
	return m.snapshotFolderLocked(r, src)
}

// snapshotFolderLocked is snapshotFolder with the repository's lock held.
// A fast-forward of the folder that a crash cut off is finished first: the
// half-written folder is never anyone's base.
func (m *Manager) snapshotFolderLocked(r *repo, src Source) (plumbing.Hash, error) {
	if _, err := m.finishFastForward(r, src); err != nil {
		return plumbing.ZeroHash, err
	}
	ixPath := r.gitDir + ".folder-index"
	prev, _ := loadIndex(ixPath)
	ix, err := scan(src.Folder, prev, r, Limits{MaxFileBytes: m.opts.Limits.MaxFileBytes, MaxStageBytes: 1 << 62, MaxFiles: m.opts.Limits.MaxFiles, MaxTreeBytes: 1 << 62})
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("snapshot the folder %s: %w", src.Folder, err)
	}
	tree, err := r.writeTree(ix)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	last, err := r.ref(folderRef)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	var parents []plumbing.Hash
	if !last.IsZero() {
		c, err := r.commit(last)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		if c.TreeHash == tree {
			if !ix.restat && prev != nil && prev.Dirs[""] == tree {
				return last, nil // the folder as it was: the saved index holds
			}
			return last, saveIndex(ixPath, ix)
		}
		parents = []plumbing.Hash{last}
	}
	h, err := r.writeCommit(tree, parents, "nanohost: the folder "+src.Name+" as a run started\n", m.signature())
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if err := r.setRef(folderRef, h, last); err != nil {
		return plumbing.ZeroHash, err
	}
	if ix.stored > 1000 {
		// many loose objects: one pack reads faster when runs check them out
		if _, err := r.git(context.Background(), nil, "repack", "-a", "-d", "-q"); err != nil {
			m.log.Warn("repack the group's repository", "repo", r.gitDir, "err", err)
		}
		r.reindex()
	}
	return h, saveIndex(ixPath, ix)
}

func (m *Manager) signature() object.Signature {
	return object.Signature{Name: m.opts.Author.Name, Email: m.opts.Author.Email, When: time.Now()}
}

// head is the commit HEAD resolves to in a repository the user owns.
func (r *repo) head() (plumbing.Hash, error) {
	r.mu.Lock()
	ref, err := r.st.Reference(plumbing.HEAD)
	r.mu.Unlock()
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("the repository %s has no HEAD: %w", r.gitDir, err)
	}
	if ref.Type() == plumbing.SymbolicReference {
		h, err := r.ref(ref.Target())
		if err != nil || h.IsZero() {
			return plumbing.ZeroHash, fmt.Errorf("the repository %s has no commit on %s yet: commit something first", r.gitDir, ref.Target().Short())
		}
		return h, nil
	}
	return ref.Hash(), nil
}

func (run *Run) refName() plumbing.ReferenceName {
	if run.ref != "" {
		return run.ref
	}
	return plumbing.NewBranchReferenceName(run.Branch)
}

// Head is the branch's last commit.
func (run *Run) Head() (plumbing.Hash, error) {
	h, err := run.repo.ref(run.refName())
	if err == nil && h.IsZero() {
		err = fmt.Errorf("branch %s is gone", run.Branch)
	}
	return h, err
}

// GitDir is the repository holding the run's branch.
func (run *Run) GitDir() string { return run.repo.gitDir }

// materialize makes the working tree hold commit h (run.mu held or unshared).
// A tree made from nothing starts as a spare of the repository when there
// is one (only the files that differ are written), and asks for the next.
func (run *Run) materialize(h plumbing.Hash) error {
	c, err := run.repo.commit(h)
	if err != nil {
		return err
	}
	files, dirs, err := run.repo.treeListing(c.TreeHash)
	if err != nil {
		return err
	}
	cur := run.ix
	fresh := cur == nil && !dirExists(run.Dir)
	trusted := false
	if fresh {
		cur, trusted = run.fromSpare()
	}
	if !trusted && (cur != nil || dirExists(run.Dir)) {
		if cur, err = scan(run.Dir, cur, run.repo, Limits{MaxStageBytes: 1 << 62, MaxFileBytes: 1 << 62, MaxTreeBytes: 1 << 62}); err != nil {
			return err
		}
	}
	ix, err := run.repo.checkout(context.Background(), run.Dir, files, cur, run.owner)
	if err != nil {
		return fmt.Errorf("check out %s into %s: %w", h.String()[:12], run.Dir, err)
	}
	ix.Dirs = dirs
	run.ix = ix
	if err := saveIndex(filepath.Join(run.stateDir, "index"), ix); err != nil {
		return err
	}
	if fresh {
		run.m.log.Debug("a run's tree made", "run", run.ID, "dir", run.Dir, "from_spare", cur != nil, "files_written", ix.wrote)
		run.m.spares.topUp(run.repo, run.owner, h)
	}
	return nil
}

func dirExists(d string) bool {
	fi, err := os.Stat(d)
	return err == nil && fi.IsDir()
}

func (run *Run) saveState(stage *StageID) error {
	data, err := json.MarshalIndent(runState{RunID: run.ID, Branch: run.Branch, Base: run.Base.String(), GitDir: run.repo.gitDir, Dir: run.Dir, Stage: stage, Ref: string(run.ref),
		Remote: run.remote, BaseBranch: run.baseBranch}, "", "  ")
	if err != nil {
		return err
	}
	return writeAtomic(filepath.Join(run.stateDir, "state.json"), data)
}

func (run *Run) loadState() (runState, error) {
	var rs runState
	data, err := os.ReadFile(filepath.Join(run.stateDir, "state.json"))
	if err == nil {
		err = json.Unmarshal(data, &rs)
	}
	return rs, err
}

func writeAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// lockFile takes an exclusive lock on path (between processes too).
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }, nil
}

// ownerFor is who a run's tree belongs to, given the folder it comes from:
// the folder's owner when the host runs as root, or the agents' user when
// root owns it too.
func (m *Manager) ownerFor(folder string) owner {
	if os.Geteuid() != 0 {
		return nobodyElse
	}
	if fi, err := os.Stat(folder); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 {
			return owner{int(st.Uid), int(st.Gid)}
		}
	}
	if m.opts.AgentUID > 0 {
		return owner{m.opts.AgentUID, m.opts.AgentGID}
	}
	return owner{1000, 1000}
}
