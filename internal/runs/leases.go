package runs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"nanohost/internal/lease"
	"nanohost/internal/pipeline/engine"
)

// Run ownership among replicas sharing the store (docs/scaling.md): each
// run is driven by the one replica holding its lease (a lease of kind
// lease.Run, kept by the replica's lease.Keeper). The replica that starts
// a run takes it; its keeper renews it every LeaseTTL/3 and, after each
// renewal round, runs the scan (a lease.Sweep) that claims the runs whose
// lease expired (their replica died) or that have none (their replica
// stopped) and resumes them from their journal. A driver whose keeper finds the lease taken over — or could not
// renew it for a whole LeaseTTL, so it may have been — stops driving at
// once and writes nothing more for the run: the new owner's view is the
// only one (fencing).

// Leases are the store's claims of runs nobody drives. Without them
// (Config.Leases nil: one host on SQLite) this process drives every run it
// starts or resumes, and takes no run leases.
type Leases interface {
	// ClaimRuns takes the leases of up to limit unfinished runs nobody
	// drives and returns them (with their source) to resume.
	ClaimRuns(ctx context.Context, owner string, ttl time.Duration, limit int) ([]Run, error)
	// ReclaimRuns takes back the unfinished runs whose lease is still
	// owner's (a replica restarted with the same id) and returns them.
	ReclaimRuns(ctx context.Context, owner string, ttl time.Duration) ([]Run, error)
}

// ErrLeaseLost stops a run whose lease another replica took over: the run
// goes on there, and this process must write nothing more for it. The
// store's journal refuses appends with it (fencing in the database).
var ErrLeaseLost = errors.New("another replica took over the run's lease")

// claimBatch bounds the runs one scan claims: the rest wait for the next
// scan, or for another replica's.
const claimBatch = 8

// leased reports whether runs are shared with other replicas.
func (ex *executor) leased() bool { return ex.leases != nil }

// runLease names the lease of a run.
func runLease(runID string) lease.ID { return lease.ID{Kind: lease.Run, Key: runID} }

// takeLease makes this replica the run's driver; false (no error) when
// another replica drives it.
func (ex *executor) takeLease(ctx context.Context, runID string) (bool, error) {
	if !ex.leased() {
		return true, nil
	}
	taken, _, err := ex.keeper.Take(ctx, runLease(runID))
	return taken, err
}

// holdLease keeps ar's lease until it is released. When the lease is lost
// it fences the run and stops it with ErrLeaseLost.
func (ex *executor) holdLease(ar *activeRun) {
	ex.keeper.Keep(runLease(ar.id), func(cause error) {
		err := ErrLeaseLost
		if cause != nil {
			err = fmt.Errorf("%w (%v)", ErrLeaseLost, cause)
		}
		ex.log.Warn("stopped driving a run: its lease is lost; the replica that took it over goes on with it",
			"run", ar.id, "replica", ex.keeper.Owner(), "err", err)
		ar.fence(err)
	})
}

// releaseLease lets the run go (it ended here, or this replica stops), so
// another replica may take it at once — unless it was fenced: the lease
// is another's then.
func (ex *executor) releaseLease(ar *activeRun) {
	if ar.isFenced() {
		ex.keeper.Forget(runLease(ar.id))
		return
	}
	if err := ex.keeper.Release(context.Background(), runLease(ar.id)); err != nil {
		ex.log.Warn("release a run's lease; it expires instead", "run", ar.id, "err", err)
	}
}

// claimOrphans resumes, at once and then after each of the keeper's
// renewal rounds (LeaseTTL/3) until the service stops, the runs no
// replica drives.
func (ex *executor) claimOrphans() {
	// Restarted with the same id, this replica takes its own runs back at
	// once rather than when their leases expire.
	mine, err := ex.leases.ReclaimRuns(ex.life, ex.keeper.Owner(), ex.keeper.TTL())
	if err != nil && ex.life.Err() == nil {
		ex.log.Warn("take back this replica's runs; they are claimed once their leases expire", "err", err)
	}
	ex.resumeClaimed(mine)
	sweep := ex.keeper.Sweep(func(context.Context) { ex.claimOrphanBatch() })
	sweep.Now()
	sweep.Run(ex.life)
}

// claimOrphanBatch claims and resumes a batch of runs nobody drives.
func (ex *executor) claimOrphanBatch() {
	if ex.refuseWhenStopping() != nil {
		return
	}
	claimed, err := ex.leases.ClaimRuns(ex.life, ex.keeper.Owner(), ex.keeper.TTL(), claimBatch)
	if err != nil {
		if ex.life.Err() == nil {
			ex.log.Warn("claim runs no replica drives; trying again", "err", err)
		}
		return
	}
	ex.resumeClaimed(claimed)
}

// resumeClaimed resumes runs whose leases this replica just took.
func (ex *executor) resumeClaimed(claimed []Run) {
	for _, run := range claimed {
		if ex.isActive(run.ID) {
			continue // it ended its lease here a moment ago and is still settling
		}
		ex.log.Info("taking over a run no replica drives", "run", run.ID, "status", run.Status, "replica", ex.keeper.Owner())
		if err := ex.resume(run); err != nil {
			ex.log.Error("resume a run taken over", "run", run.ID, "err", err)
			ex.logErr("release a run that cannot resume", run.ID, ex.keeper.Release(context.Background(), runLease(run.ID)))
		}
	}
}

// Journals keep runs' engine journals in the store replicas share, so
// that any replica can resume any run (store.OpenRunJournal), and copies
// of their stage files, so that any replica's dashboard shows them. Nil:
// each run's journal and stage files are only files in its directory (one
// host).
type Journals interface {
	// OpenRunJournal opens the run's journal for owner, whose appends
	// fail with an error wrapping ErrLeaseLost once owner no longer
	// holds the run's lease.
	OpenRunJournal(ctx context.Context, runID, owner string) (engine.Journal, error)
	// PutRunFile keeps a copy of a stage file people read (path relative
	// to the run's logs root), for every replica's dashboard.
	PutRunFile(ctx context.Context, runID, path string, data []byte) error
}

// journalFor is the engine's journal opener for run (nil: the engine's
// files). A journal append refused for a lost lease fences the run at
// once, before the next renewal would.
func (ex *executor) journalFor(ctx context.Context, ar *activeRun) engine.JournalOpener {
	if ex.journals == nil {
		return nil
	}
	return engine.JournalOpenerFunc(func(string) (engine.Journal, error) {
		j, err := ex.journals.OpenRunJournal(ctx, ar.id, ex.keeper.Owner())
		if err != nil {
			return nil, err
		}
		return fencedJournal{Journal: j, ar: ar}, nil
	})
}

// fencedJournal fences its run when the store refuses an append.
type fencedJournal struct {
	engine.Journal
	ar *activeRun
}

func (f fencedJournal) Append(rec engine.Record) error {
	err := f.Journal.Append(rec)
	if errors.Is(err, ErrLeaseLost) {
		f.ar.fence(err)
	}
	return err
}

// checkpoint is the run's state as of its last commit, with its source:
// from its journal in the store (replicas), or from its directory. An
// error wrapping fs.ErrNotExist says it has none yet.
func (ex *executor) checkpoint(ctx context.Context, run Run) (*engine.Checkpoint, error) {
	if ex.journals == nil {
		return engine.LoadCheckpoint(run.LogsRoot)
	}
	j, err := ex.journals.OpenRunJournal(ctx, run.ID, ex.keeper.Owner())
	if err != nil {
		return nil, err
	}
	cp, err := engine.StateOf(j)
	if err != nil {
		return nil, err
	}
	cp.GraphDOT = run.SourceDOT // the source the run started from, as recorded
	return cp, nil
}

// prepareRunDir gives a run resumed from the store's journal its
// directory on this replica — its lock, its stage files from now on — and
// its source there, as the engine reads it back.
func (ex *executor) prepareRunDir(run Run) error {
	if ex.journals == nil {
		return nil
	}
	if err := os.MkdirAll(run.LogsRoot, 0o755); err != nil {
		return fmt.Errorf("create the run's directory on this replica: %w", err)
	}
	src := filepath.Join(run.LogsRoot, engine.SourceFile)
	if _, err := os.Lstat(src); err == nil {
		return nil
	}
	if err := os.WriteFile(src, []byte(run.SourceDOT), 0o644); err != nil {
		return fmt.Errorf("write the run's source on this replica: %w", err)
	}
	return nil
}
