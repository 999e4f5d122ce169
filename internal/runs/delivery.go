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
	out    *deliveries
	run    Run
	ar     *activeRun
	thread Thread
	// observe, when set, sees each event once it is stored (the
	// executor keeps the run's state in step).
	observe func(Run, engine.Event)

	mu     sync.Mutex
	seq    int64
	rootID string
	// stopping is set once an event could not be stored and the run was
	// told to stop.
	stopping bool
}

// open opens the run's thread once this process holds the claim
// to deliver it: one deliverer per run, whatever the replicas, so the
// thread is told once and in order. With wait it waits for the claim (a
// dead replica's runs out after LeaseTTL) until ctx ends; without, a claim
// held elsewhere is an error. A run that has events already (a resume)
// continues its thread: the thread reads what it has not shown from the
// store, from the delivered watermark on.
func (o *deliveries) open(ctx context.Context, run Run, ar *activeRun, name string, wait bool, observe func(Run, engine.Event)) (*delivery, error) {
	if err := o.claim(ctx, run.ID, wait); err != nil {
		return nil, err
	}
	// Re-read the run as stored — its thread and watermark too — now that
	// no other deliverer moves them.
	fresh, err := o.store.GetRun(ctx, run.ID)
	if err != nil {
		o.release(run.ID)
		return nil, err
	}
	run = fresh
	d := &delivery{out: o, observe: observe, run: run, ar: ar, seq: run.LastSeq, rootID: run.ThreadTS}
	events := func(ctx context.Context, after int64) ([]engine.Event, error) {
		return o.store.Events(ctx, run.ID, after, 0)
	}
	t, err := o.threads.Open(ctx, run, name, d.persist, events)
	if err != nil {
		o.release(run.ID)
		return nil, err
	}
	d.thread = t
	o.keep(run.ID)
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
	if _, err := d.out.store.AppendEvent(context.Background(), e); err != nil {
		d.unrecorded(e, err)
		if !e.Ends() {
			return
		}
		// The run's ending could not be stored either: it is told (the
		// one line saying why the run stopped), under the number the
		// resume's first event will take — the watermark cannot pass
		// the last stored event, so that one is told too.
	}
	d.out.streams.wake(e.RunID)
	if d.observe != nil {
		d.observe(d.run, e)
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
	d.out.log.Error("store run event; the run stops (interrupted) until the store can write", "run", e.RunID, "seq", e.Seq, "type", e.Type, "err", err)
	if first {
		engine.WaitForHost(d.ar.cancel, &engine.RecordError{Err: fmt.Errorf("the host's store: %w", err)})
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
		d.out.logErr("record run thread", d.run.ID, d.out.store.SetRunThread(ctx, d.run.ID, p.RootID))
	}
	if p.LastSeq > 0 {
		d.out.logErr("record delivered seq", d.run.ID, d.out.store.SetDelivered(ctx, d.run.ID, p.LastSeq))
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
		d.out.log.Warn("run thread not delivered yet; still trying (and on the next start)", "run", d.run.ID, "err", err)
		return
	}
	d.out.release(d.run.ID)
}

func (o *deliveries) logErr(what, runID string, err error) {
	if err != nil {
		o.log.Error(what, "run", runID, "err", err)
	}
}
