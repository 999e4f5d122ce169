// Package report tells a run's story in one chat thread: a root status card
// edited in place (at most about once a second), the run's events posted
// into the thread as its verbosity allows, and its gates as prompts. It is
// the chat side of runs.Thread, channel-neutral (any channels.Channel), and
// words everything through runlog.
package report

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"nanohost/internal/channels"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/queue"
	"nanohost/internal/runlog"
	"nanohost/internal/runs"
)

// DefaultCardInterval is the least time between two edits of a status card:
// Slack allows about one update per second per message before it throttles.
const DefaultCardInterval = time.Second

// DefaultQueueSize bounds what a thread holds in memory: events beyond it
// are read back from the store when the thread catches up.
const DefaultQueueSize = 1024

// Config configures a Reporter.
type Config struct {
	Channel channels.Channel
	Chat    string

	RunID    string
	Pipeline string // display name; PipelineStarted's label when empty
	Goal     string
	// Verbosity picks what is posted into the thread (default standard).
	Verbosity runs.Verbosity
	// LogRef tells people where the run's full logs are, for truncated text.
	LogRef string
	// RunURL is the run's page on the dashboard, shown with its status
	// card ("" when there is no dashboard).
	RunURL string

	// Resume continues the thread of an earlier reporter of this run:
	// events up to LastSeq are folded into the card but not posted again.
	Resume runs.Progress
	// Taken says another reporter of this run came before (a replica
	// that died, a host restarted): it may have posted a message it had
	// not recorded yet in Resume — the root when Resume has none, else the
	// first message after Resume.LastSeq. That one is posted marked
	// MayHaveLanded, so the channel looks for it before posting it again.
	Taken bool
	// OnProgress is called after every event is dealt with, from the
	// reporter's goroutine; it should be quick (persist and return).
	OnProgress func(runs.Progress)
	// Events reads the run's stored events: a resumed reporter replays
	// them first (rebuilding the card, posting what was not delivered), and
	// a reporter whose queue overflowed reads what it missed. Nil: the
	// reporter knows only what it is told.
	Events runs.EventSource
	// GateLinks, when set, gives the links shown under each gate prompt,
	// computed as it is posted (the run's changes since it started).
	GateLinks func(ctx context.Context) []channels.Link
	// StartText, when set, gives the message posted under the card when
	// the run starts ("" for none): the branch it works on and its base,
	// with the host's git workspaces.
	StartText func(ctx context.Context) string
	// EndLinks, when set, gives the links shown under the message that the
	// run succeeded or failed (its branch, with the host's git workspaces).
	EndLinks func(ctx context.Context) []channels.Link

	CardInterval time.Duration // default DefaultCardInterval
	// Started is when the run began (zero: unknown); the card's duration
	// counts from it, across restarts.
	Started   time.Time
	QueueSize int // default DefaultQueueSize
	Logger    *slog.Logger
}

// Reporter posts one run's thread. Tell never blocks the engine: events
// queue (bounded — past the bound, the reporter reads the rest back from the
// store), and one goroutine posts them in order.
type Reporter struct {
	cfg   Config
	log   *slog.Logger
	queue *queue.Queue[item]
	// behind is set when an event did not fit in the queue: the reporter
	// reads what it missed from cfg.Events before anything else.
	behind atomic.Bool

	mu      sync.Mutex
	cp      runs.Progress
	closing bool
	done    chan struct{}

	rootReady chan struct{}
	rootErr   error

	// Owned by the run goroutine.
	card      runlog.Card
	cardDirty bool
	lastEdit  time.Time
	lastSeen  int64 // the highest event seq folded into the card
	// startNodes are the start nodes seen; their checkpoints are noise.
	startNodes map[string]bool
	// unsure is set until the first post after a takeover (Config.Taken).
	unsure bool
	// held is set when a thread message could not be posted: no later
	// event is posted or checkpointed (the card is still kept up to date).
	held bool
	// progressDue is set when events the thread shows nothing for moved
	// the progress: it is recorded once the reporter has nothing more to
	// do for now, not once per event (a resume of many runs made a store
	// write per run and event of it).
	progressDue bool
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

var _ runs.Thread = (*Reporter)(nil)

// Start posts the root status card (unless resuming) and starts delivering.
// The reporter stops when ctx ends or after Close.
func Start(ctx context.Context, cfg Config) *Reporter {
	if cfg.CardInterval <= 0 {
		cfg.CardInterval = DefaultCardInterval
	}
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = DefaultQueueSize
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	r := &Reporter{
		cfg:        cfg,
		log:        cfg.Logger.With("run", cfg.RunID, "channel", cfg.Channel.Name(), "chat", cfg.Chat),
		queue:      queue.New[item](cfg.QueueSize),
		cp:         cfg.Resume,
		done:       make(chan struct{}),
		rootReady:  make(chan struct{}),
		card:       runlog.NewCard(cfg.RunID, cfg.Pipeline, cfg.Goal),
		startNodes: make(map[string]bool),
		unsure:     cfg.Taken,
	}
	r.card.Since(cfg.Started)
	go r.run(ctx)
	return r
}

// Tell queues a stored event (runs.Thread). It never blocks: when the
// queue is full the reporter falls behind and reads the event back from the
// store later.
func (r *Reporter) Tell(e engine.Event) {
	if r.isClosing() {
		r.log.Warn("report: event after close dropped", "seq", e.Seq)
		return
	}
	if !r.queue.TryPush(item{event: &e}) && !r.behind.Swap(true) {
		r.log.Warn("report: the thread is behind; it reads the rest of the run's events from the store", "seq", e.Seq)
	}
}

// Ask posts a gate prompt after what was told before it (runs.Thread).
func (r *Reporter) Ask(ctx context.Context, g runs.Gate) (string, error) {
	var links []channels.Link
	if r.cfg.GateLinks != nil {
		links = r.cfg.GateLinks(ctx)
	}
	text := runlog.PromptText(g.Question()) + channels.LinksText(links)
	return r.PostInThread(ctx, channels.Message{Text: text, Gate: &g, Links: links})
}

// Settle edits a settled gate's prompt to say how it ended (runs.Thread).
func (r *Reporter) Settle(ctx context.Context, g runs.Gate, note runs.GateNote) error {
	if g.MessageTS == "" {
		return nil
	}
	res := runlog.ResolutionOf(g, g.AnsweredBy, note)
	if err := r.cfg.Channel.Update(ctx, r.cfg.Chat, g.MessageTS, channels.Message{Text: res.Text(), Resolved: &res}); err != nil {
		return fmt.Errorf("edit the prompt of gate %s: %w", g.GateID, err)
	}
	return nil
}

// Point says in another thread of the run's chat where the run's own
// thread is, once it exists (runs.Thread).
func (r *Reporter) Point(ctx context.Context, thread string) error {
	if _, err := r.Thread(ctx); err != nil {
		return fmt.Errorf("point thread %s at the run: the run has no thread: %w", thread, err)
	}
	m := channels.Message{Text: runlog.StartedElsewhere(r.cfg.Pipeline, r.cfg.RunID)}
	if r.cfg.RunURL != "" {
		m.Links = []channels.Link{{Text: "Dashboard", URL: r.cfg.RunURL}}
	}
	if _, err := r.cfg.Channel.Post(ctx, r.cfg.Chat, thread, m); err != nil {
		return fmt.Errorf("point thread %s at the run: %w", thread, err)
	}
	return nil
}

// PostInThread posts m into the run's thread after everything queued
// before it, and returns its message id.
func (r *Reporter) PostInThread(ctx context.Context, m channels.Message) (string, error) {
	req := &postRequest{ctx: ctx, msg: m, result: make(chan postResult, 1)}
	if r.isClosing() {
		return "", errors.New("post in run thread: the reporter is closed")
	}
	if err := r.queue.Push(ctx, item{post: req}); err != nil {
		return "", fmt.Errorf("post in run thread: %w", err)
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

// Progress returns how far the reporter got.
func (r *Reporter) Progress() runs.Progress {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cp
}

// Close delivers what is queued, edits the card a last time and stops
// (runs.Thread). It returns early with ctx's error if that takes too long;
// the reporter goes on until the context it was started with ends.
func (r *Reporter) Close(ctx context.Context) error {
	r.mu.Lock()
	r.closing = true
	r.mu.Unlock()
	r.queue.Close()
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("close reporter of run %s: %w", r.cfg.RunID, ctx.Err())
	}
}

func (r *Reporter) isClosing() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closing
}

func (r *Reporter) run(ctx context.Context) {
	defer close(r.done)
	r.postRoot(ctx)
	if r.cp.LastSeq > 0 || r.cfg.Resume.RootID != "" || r.cfg.Taken {
		// A resumed thread starts from the store — also one whose earlier
		// reporter died before posting anything: the run's stored events
		// are told first, not only what the engine tells from now on.
		r.behind.Store(true)
	}
	cardTimer := time.NewTimer(time.Hour)
	cardTimer.Stop()
	for ctx.Err() == nil {
		if r.behind.Swap(false) {
			r.catchUp(ctx)
			r.scheduleCard(ctx, cardTimer)
		}
		items := r.queue.TakeAll()
		for _, it := range items {
			if ctx.Err() != nil {
				return
			}
			if r.handle(ctx, it) {
				r.scheduleCard(ctx, cardTimer)
			}
		}
		if len(items) > 0 || r.behind.Load() {
			continue
		}
		r.recordProgress()
		if r.isClosing() && r.queue.Len() == 0 {
			r.flushCard(ctx)
			return
		}
		select {
		case <-r.queue.Ready():
		case <-cardTimer.C:
			r.flushCard(ctx)
		case <-ctx.Done():
		}
	}
}

// catchUp reads the events the reporter has not seen from the store and
// deals with them in order.
func (r *Reporter) catchUp(ctx context.Context) {
	if r.cfg.Events == nil {
		return
	}
	events, err := r.cfg.Events(ctx, r.lastSeen)
	if err != nil {
		r.log.Error("report: read the run's events from the store; the thread goes on with what it is told", "err", err)
		return
	}
	for _, e := range events {
		r.handleEvent(ctx, e)
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
	card := r.cardMessage()
	card.MayHaveLanded = r.unsure
	id, err := r.cfg.Channel.Post(ctx, r.cfg.Chat, "", card)
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
	r.unsure = false // one in flight at most: the root, then each message in turn
	r.progressed(cp)
	return true
}

// handle deals with one queued item. It returns false for an event
// delivered before a restart: replaying those only rebuilds the card, which
// is edited once the replay has caught up (not once per replayed event).
func (r *Reporter) handle(ctx context.Context, it item) bool {
	if it.post != nil {
		if r.behind.Swap(false) {
			r.catchUp(ctx) // what was told before the prompt goes first
		}
		// The post ends with the caller's context or with the reporter's
		// life, whichever ends first: a chat that refuses it must not keep
		// the reporter (and a host shutting down) waiting.
		postCtx, cancel := context.WithCancel(it.post.ctx)
		stop := context.AfterFunc(ctx, cancel)
		id, err := r.postThread(postCtx, it.post.msg)
		stop()
		cancel()
		it.post.result <- postResult{id, err}
		return true
	}
	return r.handleEvent(ctx, *it.event)
}

func (r *Reporter) handleEvent(ctx context.Context, e engine.Event) bool {
	if e.Seq > 0 && e.Seq <= r.lastSeen {
		return false // read back from the store already
	}
	r.lastSeen = max(r.lastSeen, e.Seq)
	if e.By != "" {
		e.By = channels.UserName(ctx, r.cfg.Channel, e.By) // who cancelled, as people know them
	}
	if r.card.Apply(&e) {
		r.cardDirty = true
	}
	if e.Type == engine.EventStageStarted && e.Data["handler"] == engine.TypeStart {
		r.startNodes[e.NodeID] = true
	}
	r.mu.Lock()
	already := e.Seq > 0 && e.Seq <= r.cp.LastSeq
	r.mu.Unlock()
	if already {
		return false // delivered before a restart
	}
	if r.held {
		return true // left for the next reporter
	}
	m, post := r.message(ctx, e)
	if post {
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
		r.mu.Unlock()
		// What was posted is recorded at once: after a crash at most the
		// first message past the record may have landed (Config.Taken).
		// A silent event may wait: replaying it posts nothing.
		r.progressDue = true
		if post {
			r.recordProgress()
		}
	}
	return true
}

// recordProgress hands the progress to OnProgress, if it moved since.
func (r *Reporter) recordProgress() {
	if r.progressDue {
		r.progressDue = false
		r.progressed(r.Progress())
	}
}

// message is the thread message for e, if the thread shows it.
func (r *Reporter) message(ctx context.Context, e engine.Event) (channels.Message, bool) {
	if e.Type == engine.EventCheckpointSaved && r.startNodes[e.NodeID] {
		return channels.Message{}, false // the checkpoint after the start node tells nothing
	}
	if e.Type == engine.EventPipelineStarted && r.cfg.StartText != nil {
		if text := r.cfg.StartText(ctx); text != "" {
			return channels.Message{Text: text, LogRef: r.cfg.LogRef, RunID: r.cfg.RunID, Seq: e.Seq}, true
		}
	}
	text, detail, ok := runlog.ThreadMessage(e, r.cfg.Verbosity)
	if !ok {
		return channels.Message{}, false
	}
	m := channels.Message{Text: text, Detail: detail, LogRef: r.cfg.LogRef, RunID: r.cfg.RunID, Seq: e.Seq}
	if r.cfg.EndLinks != nil && (e.Type == engine.EventPipelineCompleted || e.Type == engine.EventPipelineFailed) {
		m.Links = r.cfg.EndLinks(ctx) // the channel shows them under Text, once
	}
	if number, url, ok := runlog.PullRequestOf(e); ok && url != "" {
		m.Links = []channels.Link{{Text: runlog.PullRequestLink(number), URL: url}}
	}
	return m, true
}

func (r *Reporter) postThread(ctx context.Context, m channels.Message) (string, error) {
	if r.Progress().RootID == "" && !r.tryRoot(ctx) {
		return "", fmt.Errorf("no thread to post in: %w", r.rootErrNow())
	}
	if m.Seq > 0 && r.unsure {
		m.MayHaveLanded = true
	}
	id, err := r.cfg.Channel.Post(ctx, r.cfg.Chat, r.Progress().RootID, m)
	if err == nil && m.Seq > 0 {
		r.unsure = false
	}
	return id, err
}

func (r *Reporter) rootErrNow() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rootErr
}

func (r *Reporter) progressed(cp runs.Progress) {
	if r.cfg.OnProgress != nil {
		r.cfg.OnProgress(cp)
	}
}

// scheduleCard edits the card now if the last edit is old enough, or arms
// the timer for when it will be; edits in between coalesce.
func (r *Reporter) scheduleCard(ctx context.Context, timer *time.Timer) {
	if !r.cardDirty {
		return
	}
	wait := r.cfg.CardInterval - time.Since(r.lastEdit)
	if wait <= 0 || r.card.Final() {
		r.flushCard(ctx)
		return
	}
	timer.Reset(wait)
}

func (r *Reporter) flushCard(ctx context.Context) {
	root := r.Progress().RootID
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
	m := channels.Message{Text: card.Text(), Card: &card}
	if r.cfg.RunURL != "" {
		m.Links = []channels.Link{{Text: "Dashboard", URL: r.cfg.RunURL}}
	}
	return m
}
