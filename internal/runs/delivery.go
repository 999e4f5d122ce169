package runs

import (
	"context"
	"fmt"
	"sync"
	"time"

	"nanohost/internal/pipeline/engine"
)

// delivery is a run's way out: every engine event is first appended to the
// run's event log in the store (the source of truth, with a seq this
// service assigns), then handed to the run's thread, which tells it in the
// chat as the verbosity allows. The thread's progress (root message, last
// delivered seq) is persisted, so after a restart it continues where it
// stopped and nothing is posted twice.
type delivery struct {
	s      *Service
	run    Run
	ar     *activeRun
	thread Thread

	mu     sync.Mutex
	seq    int64
	rootID string
	// stopping is set once an event could not be stored and the run was
	// told to stop.
	stopping bool
}

// openDelivery opens the run's thread once this process holds the claim
// to deliver it: one deliverer per run, whatever the replicas, so the
// thread is told once and in order. With wait it waits for the claim (a
// dead replica's runs out after LeaseTTL) until ctx ends; without, a claim
// held elsewhere is an error. A run that has events already (a resume)
// continues its thread: the thread reads what it has not shown from the
// store, from the delivered watermark on.
func (s *Service) openDelivery(ctx context.Context, run Run, ar *activeRun, name string, wait bool) (*delivery, error) {
	if err := s.claimDelivery(ctx, run.ID, wait); err != nil {
		return nil, err
	}
	if run.LastSeq > 0 {
		// Re-read the watermark now that no other deliverer moves it.
		fresh, err := s.cfg.Store.GetRun(ctx, run.ID)
		if err != nil {
			s.releaseDelivery(run.ID)
			return nil, err
		}
		run.ThreadTS, run.LastSeq, run.LastDeliveredSeq = fresh.ThreadTS, fresh.LastSeq, fresh.LastDeliveredSeq
	}
	d := &delivery{s: s, run: run, ar: ar, seq: run.LastSeq, rootID: run.ThreadTS}
	events := func(ctx context.Context, after int64) ([]engine.Event, error) {
		return s.cfg.Store.Events(ctx, run.ID, after, 0)
	}
	t, err := s.cfg.Threads.Open(ctx, run, name, d.persist, events)
	if err != nil {
		s.releaseDelivery(run.ID)
		return nil, err
	}
	d.thread = t
	s.keepDelivery(run.ID)
	return d, nil
}

// OnEvent implements engine.Observer. The engine's own seq restarts from
// its checkpoint on resume (events after the last checkpoint would collide),
// so the event log is numbered here.
func (d *delivery) OnEvent(e engine.Event) {
	if d.ar.isFenced() {
		return // the run goes on at the replica that took its lease
	}
	d.mu.Lock()
	d.seq++
	e.Seq = d.seq
	d.mu.Unlock()
	if e.RunID == "" {
		e.RunID = d.run.ID
	}
	if _, err := d.s.cfg.Store.AppendEvent(context.Background(), e); err != nil {
		d.unrecorded(e, err)
		if !e.Ends() {
			return
		}
		// The run's ending could not be stored either: it is told (the
		// one line saying why the run stopped), under the number the
		// resume's first event will take — the watermark cannot pass
		// the last stored event, so that one is told too.
	}
	d.s.streams.wake(e.RunID)
	d.observe(e)
	if d.s.cfg.Observe != nil {
		d.s.cfg.Observe(d.run, e)
	}
	d.thread.Tell(e)
}

// unrecorded handles an event the store could not record (its disk is
// full or failing): its number is given back, so the event log has no gap
// and goes on in step with the run's journal, and the run is stopped —
// interrupted, waiting for the host, never failed: it cannot record its
// progress, so it must not make any more. It goes on from its last
// recorded step once the store can write again.
func (d *delivery) unrecorded(e engine.Event, err error) {
	d.mu.Lock()
	d.seq--
	first := !d.stopping
	d.stopping = true
	d.mu.Unlock()
	d.s.log.Error("store run event; the run stops (interrupted) until the store can write", "run", e.RunID, "seq", e.Seq, "type", e.Type, "err", err)
	if first {
		engine.WaitForHost(d.ar.cancel, &engine.RecordError{Err: fmt.Errorf("the host's store: %w", err)})
	}
}

// observe keeps the run's state in the store in step with its events.
func (d *delivery) observe(e engine.Event) {
	ctx := context.Background()
	switch e.Type {
	case engine.EventStageStarted:
		if e.Branch == "" {
			d.ar.setCurrent(e.NodeID)
		}
	case engine.EventStageCompleted:
		if e.NodeID != "" {
			d.s.keepStageFiles(ctx, d.run, d.ar.stageDir(e.NodeID))
		}
	case engine.EventWarning:
		if dir, ok := e.Data["stage_root"].(string); ok { // a loop restart
			d.ar.setStageRoot(dir)
		}
	case engine.EventInterviewStarted:
		d.s.logErr("mark run waiting", d.run.ID, d.s.cfg.Store.UpdateRunStatus(ctx, d.run.ID, Waiting))
	case engine.EventInterviewCompleted, engine.EventInterviewTimeout:
		d.s.logErr("mark run running", d.run.ID, d.s.cfg.Store.UpdateRunStatus(ctx, d.run.ID, Running))
	}
}

// persist records the thread's progress (called from its goroutine).
func (d *delivery) persist(p Progress) {
	if d.ar.isFenced() {
		return
	}
	ctx := context.Background()
	d.mu.Lock()
	newRoot := p.RootID != "" && p.RootID != d.rootID
	d.rootID = p.RootID
	d.mu.Unlock()
	if newRoot {
		d.s.logErr("record run thread", d.run.ID, d.s.cfg.Store.SetRunThread(ctx, d.run.ID, p.RootID))
	}
	if p.LastSeq > 0 {
		d.s.logErr("record delivered seq", d.run.ID, d.s.cfg.Store.SetDelivered(ctx, d.run.ID, p.LastSeq))
	}
}

// close lets the thread deliver what is queued and stop. It waits a
// bounded time, so a run's end (and shutdown) never hangs on a chat that is
// down; the thread keeps trying in the background until the host stops,
// still holding the run's delivery claim, and what it could not deliver by
// then goes out on the next start (or from another replica).
func (d *delivery) close(wait time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := d.thread.Close(ctx); err != nil {
		d.s.log.Warn("run thread not delivered yet; still trying (and on the next start)", "run", d.run.ID, "err", err)
		return
	}
	d.s.releaseDelivery(d.run.ID)
}
