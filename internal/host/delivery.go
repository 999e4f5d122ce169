package host

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"nanohost/internal/channels"
	"nanohost/internal/channels/report"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/store"
)

// delivery is a run's way out: every engine event is first appended to the
// run's event log in the store (the source of truth, with a host-assigned
// seq), then handed to the channel's run reporter, which posts it in the
// run's thread as the verbosity allows. The reporter's progress (root
// message, last delivered seq) is persisted, so after a restart the thread
// continues where it stopped and nothing is posted twice.
//
// The reporter posts through a patientChannel: a chat that is down holds
// delivery up (posts are retried with backoff, in order), never the run.
// The delivered-seq watermark only moves past events whose posts went
// through; whatever was not delivered when the host stops is posted by the
// next start.
type delivery struct {
	h        *Host
	run      store.Run
	ar       *activeRun
	channel  *patientChannel
	reporter *report.Reporter

	mu     sync.Mutex
	seq    int64
	rootID string
}

// newDelivery starts the run's reporter. For a run that has events already
// (a resume), the stored events are replayed into it first: those already
// delivered only rebuild the status card, the rest are posted now.
func (h *Host) newDelivery(ctx context.Context, run store.Run, ar *activeRun, pipelineName string) (*delivery, error) {
	ch, err := h.channelFor(run.ChatID)
	if err != nil {
		return nil, err
	}
	fresh, err := h.store.GetRun(ctx, run.ID)
	if err != nil {
		return nil, err
	}
	out := newPatientChannel(ch, h.deliveryBackoff, h.log.With("run", run.ID))
	d := &delivery{h: h, run: fresh, ar: ar, channel: out, seq: fresh.LastSeq, rootID: fresh.ThreadTS}
	// The reporter outlives the run (it may still be waiting for the chat
	// to come back); it stops with the host.
	d.reporter = report.Start(h.deliveryCtx, report.Config{
		Channel: out, Chat: run.ChatID, RunID: run.ID, Pipeline: pipelineName, Goal: run.Goal,
		Verbosity:    verbosityOr(run.Verbosity, h.cfg.Pipelines.DefaultVerbosity),
		LogRef:       run.LogsRoot,
		Resume:       report.Checkpoint{RootID: fresh.ThreadTS, LastSeq: fresh.LastDeliveredSeq},
		OnCheckpoint: d.persist,
		Logger:       h.log.With("component", "report"),
	})
	if fresh.LastSeq > 0 {
		past, err := h.store.Events(ctx, run.ID, 0, 0)
		if err != nil {
			return nil, err
		}
		for _, e := range past {
			d.reporter.OnEvent(e)
		}
	}
	return d, nil
}

// OnEvent implements engine.Observer. The engine's own seq restarts from
// its checkpoint on resume (events after the last checkpoint would collide),
// so the host numbers the events of the log itself.
func (d *delivery) OnEvent(e engine.Event) {
	d.mu.Lock()
	d.seq++
	e.Seq = d.seq
	d.mu.Unlock()
	if cancelled, _ := e.Data["cancelled"].(bool); e.Type == engine.EventPipelineFailed && cancelled && !d.ar.cancelled.Load() {
		// Stopped by the host's shutdown, not by a person: it resumes.
		e.Data = maps.Clone(e.Data)
		e.Data[report.DataInterrupted] = true
	}
	if _, err := d.h.store.AppendEvent(context.Background(), e); err != nil {
		d.h.log.Error("store run event", "run", e.RunID, "seq", e.Seq, "type", e.Type, "err", err)
	}
	d.h.streams.wake(e.RunID)
	d.observe(e)
	d.reporter.OnEvent(e)
}

// observe keeps the run's status and the metrics in step with its events.
func (d *delivery) observe(e engine.Event) {
	ctx := context.Background()
	switch e.Type {
	case engine.EventStageStarted:
		if e.Branch == "" {
			d.ar.current.Store(e.NodeID)
		}
	case engine.EventStageCompleted, engine.EventStageFailed:
		if e.Duration > 0 {
			status := string(e.Status)
			if e.Status.IsCustom() {
				status = "custom" // agents choose these words: one label keeps the series bounded
			}
			d.h.metrics.NodeDuration.WithLabelValues(status).Observe(e.Duration.Seconds())
		}
	case engine.EventInterviewStarted:
		_ = d.h.store.UpdateRunStatus(ctx, d.run.ID, store.RunWaiting)
	case engine.EventInterviewCompleted, engine.EventInterviewTimeout:
		_ = d.h.store.UpdateRunStatus(ctx, d.run.ID, store.RunRunning)
	}
}

// persist records the reporter's progress (called from its goroutine).
func (d *delivery) persist(cp report.Checkpoint) {
	ctx := context.Background()
	d.mu.Lock()
	newRoot := cp.RootID != "" && cp.RootID != d.rootID
	d.rootID = cp.RootID
	d.mu.Unlock()
	if newRoot {
		if err := d.h.store.SetRunThread(ctx, d.run.ID, cp.RootID); err != nil {
			d.h.log.Warn("record run thread", "run", d.run.ID, "err", err)
		}
	}
	if d.channel.gaveUp.Load() {
		// A thread message could not be posted (the host is stopping):
		// the reporter moves on, the watermark does not.
		return
	}
	if cp.LastSeq > 0 {
		if err := d.h.store.SetDelivered(ctx, d.run.ID, cp.LastSeq); err != nil {
			d.h.log.Warn("record delivered seq", "run", d.run.ID, "err", err)
		}
	}
}

// close lets the reporter deliver what is queued and stop. It waits a
// bounded time, so a run's end (and shutdown) never hangs on a chat that is
// down; the reporter keeps trying in the background until the host stops,
// and what it could not deliver by then goes out on the next start.
func (d *delivery) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := d.reporter.Close(ctx); err != nil {
		d.h.log.Warn("run thread not delivered yet; still trying (and on the next start)", "run", d.run.ID, "err", err)
	}
}

// postNote posts a note in the run's thread after its events, waiting
// (as long as the host runs) for a chat that is down.
func (d *delivery) postNote(text string) {
	if _, err := d.reporter.PostInThread(d.h.deliveryCtx, channels.Message{Text: text}); err != nil {
		d.h.log.Warn("post in run thread", "run", d.run.ID, "err", err)
	}
}

// pointFrom tells the conversation thread a run was asked from where the
// run's own thread is: a run's story is always told in one thread, under its
// status card.
func (d *delivery) pointFrom(thread, pipelineName string) {
	root, err := d.reporter.Thread(d.h.deliveryCtx)
	if err != nil || root == "" {
		return
	}
	text := fmt.Sprintf("Started %s (run %s); its progress is in the run's own thread.", nonEmpty(pipelineName, "the pipeline"), d.run.ID)
	// Its own patience: a lost pointer is not a lost run event.
	out := newPatientChannel(d.channel.Channel, d.h.deliveryBackoff, d.h.log.With("run", d.run.ID))
	if _, err := out.Post(d.h.deliveryCtx, d.run.ChatID, thread, channels.Message{Text: text}); err != nil {
		d.h.log.Warn("point the asking thread at the run", "run", d.run.ID, "err", err)
	}
}
