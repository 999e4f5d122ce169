// Package report tells a run's story in one chat thread: a root status card
// edited in place (at most about once a second), and the run's events
// posted into the thread as its verbosity allows. It is channel-neutral:
// give it any channels.Channel.
package report

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"nanohost/internal/channels"
	"nanohost/internal/pipeline/engine"
)

// DefaultCardInterval is the least time between two edits of a status card:
// Slack allows about one update per second per message before it throttles.
const DefaultCardInterval = time.Second

// Checkpoint is how far a reporter got: its root message and the last event
// it delivered. The host persists it so a reporter started after a restart
// continues the same thread without repeating messages.
type Checkpoint struct {
	RootID  string `json:"root_id"`
	LastSeq int64  `json:"last_seq"`
}

// Config configures a Reporter.
type Config struct {
	Channel channels.Channel
	Chat    string

	RunID    string
	Pipeline string // display name; PipelineStarted's label when empty
	Goal     string
	// Verbosity picks what is posted into the thread (default standard).
	Verbosity channels.Verbosity
	// LogRef tells people where the run's full logs are, for truncated text.
	LogRef string

	// Resume continues the thread of an earlier reporter of this run:
	// events up to LastSeq are folded into the card but not posted again.
	Resume Checkpoint
	// OnCheckpoint is called after every event is dealt with, from the
	// reporter's goroutine; it should be quick (persist and return).
	OnCheckpoint func(Checkpoint)

	CardInterval time.Duration // default DefaultCardInterval
	Logger       *slog.Logger
}

// Reporter posts one run's thread. OnEvent never blocks the engine: events
// queue (without bound — a slow or rate-limited chat never loses thread
// messages nor stalls the pipeline) and one goroutine posts them in order.
type Reporter struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	queue   []item
	closing bool
	cp      Checkpoint
	wake    chan struct{}
	done    chan struct{}

	rootReady chan struct{}
	rootErr   error

	// Owned by the run goroutine.
	card      channels.StatusCard
	started   time.Time
	cardDirty bool
	lastEdit  time.Time
	// startNodes are the start nodes seen; their checkpoints are noise.
	startNodes map[string]bool
	// held is set when a thread message could not be posted: no later
	// event is posted or checkpointed (the card is still kept up to date).
	held bool
}

// item is a queued event, or a message to post in the thread in order.
type item struct {
	event *engine.Event
	post  *postRequest
}

type postRequest struct {
	ctx    context.Context
	msg    channels.Message
	result chan postResult
}

type postResult struct {
	id  string
	err error
}

// Start posts the root status card (unless resuming) and starts delivering.
// The reporter stops when ctx ends or after Close.
func Start(ctx context.Context, cfg Config) *Reporter {
	if cfg.CardInterval <= 0 {
		cfg.CardInterval = DefaultCardInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	r := &Reporter{
		cfg:       cfg,
		log:       cfg.Logger.With("run", cfg.RunID, "channel", cfg.Channel.Name(), "chat", cfg.Chat),
		cp:        cfg.Resume,
		wake:      make(chan struct{}, 1),
		done:      make(chan struct{}),
		rootReady: make(chan struct{}),
		card: channels.StatusCard{
			RunID: cfg.RunID, Pipeline: cfg.Pipeline, Goal: cfg.Goal, State: channels.RunRunning,
		},
		startNodes: make(map[string]bool),
	}
	go r.run(ctx)
	return r
}

// OnEvent queues an engine event (engine.Observer). It never blocks.
func (r *Reporter) OnEvent(e engine.Event) { r.enqueue(item{event: &e}) }

// PostInThread posts m into the run's thread after everything queued
// before it, and returns its message id (gate prompts use this).
func (r *Reporter) PostInThread(ctx context.Context, m channels.Message) (string, error) {
	req := &postRequest{ctx: ctx, msg: m, result: make(chan postResult, 1)}
	if !r.enqueue(item{post: req}) {
		return "", errors.New("post in run thread: the reporter is closed")
	}
	select {
	case res := <-req.result:
		return res.id, res.err
	case <-ctx.Done():
		return "", ctx.Err()
	case <-r.done:
		return "", errors.New("post in run thread: the reporter stopped")
	}
}

// Thread waits for the first attempt at the root message and returns its
// id (the thread), or why there is none yet.
func (r *Reporter) Thread(ctx context.Context) (string, error) {
	select {
	case <-r.rootReady:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cp.RootID == "" {
		return "", r.rootErr
	}
	return r.cp.RootID, nil
}

// Checkpoint returns how far the reporter got.
func (r *Reporter) Checkpoint() Checkpoint {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cp
}

// Close delivers what is queued, edits the card a last time and stops. It
// returns early with ctx's error if that takes too long.
func (r *Reporter) Close(ctx context.Context) error {
	r.mu.Lock()
	r.closing = true
	r.mu.Unlock()
	r.signal()
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("close reporter of run %s: %w", r.cfg.RunID, ctx.Err())
	}
}

func (r *Reporter) enqueue(it item) bool {
	r.mu.Lock()
	if r.closing {
		r.mu.Unlock()
		r.log.Warn("report: event after close dropped", "seq", seqOf(it))
		return false
	}
	r.queue = append(r.queue, it)
	r.mu.Unlock()
	r.signal()
	return true
}

func seqOf(it item) int64 {
	if it.event != nil {
		return it.event.Seq
	}
	return 0
}

func (r *Reporter) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *Reporter) take() (items []item, closing bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	items, r.queue = r.queue, nil
	return items, r.closing
}

func (r *Reporter) run(ctx context.Context) {
	defer close(r.done)
	r.postRoot(ctx)
	cardTimer := time.NewTimer(time.Hour)
	cardTimer.Stop()
	for {
		items, closing := r.take()
		for _, it := range items {
			if ctx.Err() != nil {
				return
			}
			if r.handle(ctx, it) {
				r.scheduleCard(ctx, cardTimer)
			}
		}
		if len(items) > 0 {
			continue
		}
		if closing {
			r.flushCard(ctx)
			return
		}
		select {
		case <-r.wake:
		case <-cardTimer.C:
			r.flushCard(ctx)
		case <-ctx.Done():
			return
		}
	}
}

func (r *Reporter) postRoot(ctx context.Context) {
	defer close(r.rootReady)
	if r.cp.RootID != "" {
		r.cardDirty = true // refresh the card the host restart left behind
		return
	}
	r.tryRoot(ctx)
}

// tryRoot posts the status card as the thread's root. If the chat refuses
// it, the next thread message tries again: the story goes into a thread or
// nowhere, never loose in the channel.
func (r *Reporter) tryRoot(ctx context.Context) bool {
	id, err := r.cfg.Channel.Post(ctx, r.cfg.Chat, "", r.cardMessage())
	if err != nil {
		r.mu.Lock()
		r.rootErr = fmt.Errorf("post status card of run %s: %w", r.cfg.RunID, err)
		r.mu.Unlock()
		r.log.Error("report: root message", "err", err)
		return false
	}
	r.mu.Lock()
	r.cp.RootID = id
	cp := r.cp
	r.mu.Unlock()
	r.lastEdit = time.Now()
	r.checkpointed(cp)
	return true
}

// handle deals with one queued item. It returns false for an event
// delivered before a restart: replaying those only rebuilds the card, which
// is edited once the replay has caught up (not once per replayed event).
func (r *Reporter) handle(ctx context.Context, it item) bool {
	if it.post != nil {
		id, err := r.postThread(it.post.ctx, it.post.msg)
		it.post.result <- postResult{id, err}
		return true
	}
	e := *it.event
	r.fold(&e)
	r.mu.Lock()
	already := e.Seq > 0 && e.Seq <= r.cp.LastSeq
	r.mu.Unlock()
	if already {
		return false // delivered before a restart
	}
	if r.held {
		return true // left for the next reporter
	}
	if m, ok := EventMessage(e, r.cfg.Verbosity); ok && !r.startCheckpoint(e) {
		m.LogRef, m.RunID, m.Seq = r.cfg.LogRef, r.cfg.RunID, e.Seq
		if _, err := r.postThread(ctx, m); err != nil {
			// The channel retried what can be retried. Posting what
			// follows would tell the story out of order, and moving the
			// checkpoint past this event would lose it: the thread stops
			// here, and a reporter started from the checkpoint (the next
			// start of the host) posts the rest.
			r.held = true
			r.log.Error("report: thread message not delivered; the thread goes on from here when the run's reporter starts again",
				"seq", e.Seq, "type", e.Type, "err", err)
			return true
		}
	}
	if e.Seq > 0 {
		r.mu.Lock()
		r.cp.LastSeq = e.Seq
		cp := r.cp
		r.mu.Unlock()
		r.checkpointed(cp)
	}
	return true
}

// startCheckpoint reports whether e is the checkpoint after the start
// node, which tells people nothing.
func (r *Reporter) startCheckpoint(e engine.Event) bool {
	return e.Type == engine.EventCheckpointSaved && r.startNodes[e.NodeID]
}

func (r *Reporter) postThread(ctx context.Context, m channels.Message) (string, error) {
	if r.Checkpoint().RootID == "" && !r.tryRoot(ctx) {
		return "", fmt.Errorf("no thread to post in: %w", r.rootErrNow())
	}
	return r.cfg.Channel.Post(ctx, r.cfg.Chat, r.Checkpoint().RootID, m)
}

func (r *Reporter) rootErrNow() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rootErr
}

func (r *Reporter) checkpointed(cp Checkpoint) {
	if r.cfg.OnCheckpoint != nil {
		r.cfg.OnCheckpoint(cp)
	}
}

// fold updates the status card with e (every event, delivered before or
// not, so a restarted reporter rebuilds the card from a replay). It also
// fills in a run duration the engine left out.
func (r *Reporter) fold(e *engine.Event) {
	c := &r.card
	changed := true
	switch e.Type {
	case engine.EventPipelineStarted, engine.EventPipelineResumed:
		if c.Pipeline == "" {
			c.Pipeline = e.Label
		}
		if c.Goal == "" && e.Type == engine.EventPipelineStarted {
			c.Goal = e.Message
		}
		if r.started.IsZero() {
			r.started = e.Time
		}
		if e.Total > 0 {
			c.Total = e.Total
		}
		c.State, c.Reason = channels.RunRunning, "" // a resumed run is no longer interrupted
	case engine.EventStageStarted:
		if handler(*e) == "start" {
			r.startNodes[e.NodeID] = true
			changed = false
			break
		}
		c.Current, c.Index = stageName(*e), e.Index
		if e.Total > 0 {
			c.Total = e.Total
		}
		c.State = channels.RunRunning
	case engine.EventStageCompleted, engine.EventStageFailed:
		if _, text, _ := describe(*e); text != "" {
			c.LastOutcome = text
		}
		if e.Usage != nil {
			c.CostUSD += e.Usage.CostUSD
		}
	case engine.EventInterviewStarted:
		c.State = channels.RunWaiting
		if e.Label != "" {
			c.Current = e.Label
		}
	case engine.EventInterviewCompleted, engine.EventInterviewTimeout:
		c.State = channels.RunRunning
	case engine.EventPipelineCompleted, engine.EventPipelineFailed:
		if e.Duration == 0 && !r.started.IsZero() && !e.Time.IsZero() {
			e.Duration = e.Time.Sub(r.started)
		}
		if e.Usage != nil && e.Usage.CostUSD > 0 {
			c.CostUSD = e.Usage.CostUSD
		}
		if Interrupted(*e) {
			c.State, c.Reason = channels.RunInterrupted, "resumes when the host starts again"
			break
		}
		c.Current = ""
		c.State = channels.RunSucceeded
		if e.Type == engine.EventPipelineFailed {
			c.State, c.Reason = channels.RunFailed, e.Message
			if cancelled, _ := e.Data["cancelled"].(bool); cancelled {
				c.State = channels.RunCancelled
			}
		}
	default:
		changed = false
	}
	if changed {
		r.cardDirty = true
	}
	if !r.started.IsZero() && !e.Time.IsZero() && e.Time.After(r.started) {
		if e.Type == engine.EventPipelineCompleted || e.Type == engine.EventPipelineFailed {
			c.Elapsed = e.Duration
		} else {
			c.Elapsed = e.Time.Sub(r.started)
		}
	}
}

// scheduleCard edits the card now if the last edit is old enough, or arms
// the timer for when it will be; edits in between coalesce.
func (r *Reporter) scheduleCard(ctx context.Context, timer *time.Timer) {
	if !r.cardDirty {
		return
	}
	final := r.card.State == channels.RunSucceeded || r.card.State == channels.RunFailed || r.card.State == channels.RunCancelled ||
		r.card.State == channels.RunInterrupted
	wait := r.cfg.CardInterval - time.Since(r.lastEdit)
	if wait <= 0 || final {
		r.flushCard(ctx)
		return
	}
	timer.Reset(wait)
}

func (r *Reporter) flushCard(ctx context.Context) {
	root := r.Checkpoint().RootID
	if !r.cardDirty || root == "" {
		return
	}
	r.cardDirty = false
	r.lastEdit = time.Now()
	if err := r.cfg.Channel.Update(ctx, r.cfg.Chat, root, r.cardMessage()); err != nil {
		r.log.Warn("report: status card edit", "err", err)
	}
}

func (r *Reporter) cardMessage() channels.Message {
	card := r.card
	return channels.Message{Text: channels.CardText(card), Card: &card}
}
