package host

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"time"

	"nanohost/internal/channels"
	"nanohost/internal/channels/report"
	"nanohost/internal/lease"
	"nanohost/internal/queue"
	"nanohost/internal/store"
)

// chatThreadKey is the store's session key of a group's main conversation.
const chatThreadKey = ""

// chatQueueSize bounds the messages waiting for one group's agent. Past
// it, messages stay stored unprocessed and are answered after the next
// restart (nothing is lost).
const chatQueueSize = 1000

// chatDeps are what the chat router works with.
type chatDeps struct {
	store       *store.Store
	agents      Agents
	env         agentEnv
	groups      *groupIndex
	endpoints   *endpoints
	metrics     *Metrics
	log         *slog.Logger
	deliveryCtx context.Context
	backoff     report.Backoff
	timeout     time.Duration // runtime.node_timeout, per reply
	// leases, when set (replicas sharing a PostgreSQL store), make each
	// group's conversation one replica's: see chat_leases.go. Nil: this
	// host holds every group.
	leases *lease.Keeper
}

// chatRouter turns chat messages into agent work: one worker per group, so
// a group has at most one agent container at a time. Messages that arrive
// while the agent works queue behind it and are sent, in order, to the same
// live container (and agent session) as follow-ups.
//
// Every inbound message is stored before anything is done with it, and
// marked processed once the agent's reply is posted (or when it calls for
// none). Messages still unprocessed at start-up — queued, or being answered
// when the host died — are queued again, in order, before the channels
// deliver anything new.
type chatRouter struct {
	chatDeps
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	workers map[string]*chatWorker
	threads map[threadRef]bool // conversations the agent takes part in
	// holding keeps new workers from taking work while the messages a
	// previous instance left are queued again, so a thread's messages
	// reach the agent together, as they would have.
	holding bool
	// stopped: stop began, so no worker starts any more (what reaches a
	// new worker now stays stored and is answered after the restart).
	// Set under mu before stop waits on wg, so no worker's wg.Go can race
	// that Wait.
	stopped bool
	// leaving are the workers of groups let go, until their conversation
	// is closed (see chatWorker.after).
	leaving map[string]<-chan struct{}
	// waiting takes the messages waiting for groups this replica holds or
	// nobody does (chat_leases.go); nil without leases.
	waiting *lease.Sweep
	wg      sync.WaitGroup
}

type threadRef struct{ chat, thread string }

// maxTakenMessages bounds a worker's memory of the messages it took.
const maxTakenMessages = 100_000

// maxRememberedThreads bounds the in-memory set of conversation threads.
const maxRememberedThreads = 4096

type chatWorker struct {
	group   store.Group
	conv    Conversation
	pending *queue.Queue[chatItem]
	started bool
	// queued are the stored messages (by channel message id) this worker
	// took, answered or not: a scan of the store that read one as
	// unanswered just before it was answered, or the inbound path racing
	// a scan, does not queue it again. Guarded by chatRouter.mu.
	queued map[string]bool
	// ctx ends when the host stops or this replica lets the group go.
	ctx    context.Context
	cancel context.CancelFunc
	// after is closed once the group's previous worker here (let go
	// before) has closed its conversation: the container backend keys a
	// conversation by group, so this one opens only then. done is this
	// worker's own.
	after <-chan struct{}
	done  chan struct{}
}

type chatItem struct {
	ch channels.Channel
	in channels.Inbound
	// stored: taken from the store, not from the channel — a process
	// that died may have posted its answer without recording it.
	stored bool
}

func newChatRouter(d chatDeps) *chatRouter {
	r := &chatRouter{chatDeps: d, workers: map[string]*chatWorker{}, threads: map[threadRef]bool{},
		leaving: map[string]<-chan struct{}{}}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.waiting = r.watchWaiting()
	return r
}

// handle stores an inbound message and queues it for the group's agent when
// it is addressed to the agent: it triggers it (a mention, the trigger
// word, any console line), or it is a reply in a thread that is a
// conversation with the agent. Among replicas, only the one holding the
// group's lease queues it; elsewhere it stays stored, unanswered, and its
// store write wakes the holder, which takes it from there.
func (r *chatRouter) handle(ctx context.Context, ch channels.Channel, in channels.Inbound) {
	g, ok := r.groups.byChatID(in.Chat)
	if !ok || strings.TrimSpace(in.Text) == "" {
		return
	}
	wanted := triggered(g, in) || r.inConversation(ctx, in)
	if in.MsgID != "" {
		m := store.Message{
			ChatID: in.Chat, ChannelMsgID: in.MsgID, ThreadTS: in.Thread, UserID: in.User, Text: in.Text,
			TS: orNow(in.At), Direction: store.Inbound,
		}
		if !wanted {
			m.ProcessedAt = time.Now() // nothing to do for it, now or after a restart
		}
		saved, err := r.store.SaveMessage(ctx, m)
		if err != nil {
			r.log.Warn("store inbound message", "chat", in.Chat, "err", err)
		} else if !saved {
			return // a redelivery of a message we already have
		}
	}
	if !wanted {
		return
	}
	r.remember(in)
	if in.MsgID == "" || r.holds(ctx, g) { // a message not stored is answered where it came
		r.enqueue(r.worker(g), chatItem{ch: ch, in: in})
	}
}

// promptKeyPrefix starts the message key of a prompt no person wrote (a
// scheduled task's, a webhook's): its reply is posted in the chat itself.
const promptKeyPrefix = "prompt:"

// isolatedKeyPrefix starts the message key of a scheduled task's isolated
// prompt (context_mode isolated): "prompt:isolated/<task>/<fire key>". It
// is stored and answered as every message is — by the replica holding the
// group, once, its reply posted once even across a replica's death — but
// in a fresh session of its own (the task's), not the group's conversation.
const isolatedKeyPrefix = promptKeyPrefix + "isolated/"

// isolatedKey is the prompt key (for prompt) of task's isolated prompt
// for the fire keyed fire.
func isolatedKey(task, fire string) string {
	return strings.TrimPrefix(isolatedKeyPrefix, promptKeyPrefix) + task + "/" + fire
}

// isolatedTask is the task whose isolated prompt message id is ("": not
// one).
func isolatedTask(msgID string) string {
	rest, ok := strings.CutPrefix(msgID, isolatedKeyPrefix)
	if !ok {
		return ""
	}
	task, _, _ := strings.Cut(rest, "/")
	return task
}

// prompt gives text to group g's agent in its conversation as though
// user had written it in chat, keyed by key: a prompt given again under
// the same key (a fire done again after its replica died) is stored once
// and answered once, by the replica holding the group, like any message.
// It reports whether the prompt is new.
func (r *chatRouter) prompt(ctx context.Context, g store.Group, ch channels.Channel, chat, key, user, text string) (bool, error) {
	in := channels.Inbound{Kind: channels.KindMessage, Channel: ch.Name(), Chat: chat, User: user, Text: text,
		MsgID: promptKeyPrefix + key, At: time.Now()}
	saved, err := r.store.SaveMessage(ctx, store.Message{ChatID: chat, ChannelMsgID: in.MsgID, UserID: user, Text: text,
		TS: in.At, Direction: store.Inbound})
	if err != nil || !saved {
		return false, err
	}
	if r.holds(ctx, g) {
		r.enqueue(r.worker(g), chatItem{ch: ch, in: in})
	}
	return true, nil
}

// remember makes in's thread a conversation with the agent.
func (r *chatRouter) remember(in channels.Inbound) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.threads) >= maxRememberedThreads {
		// The memory only matters until the agent's first answer in a
		// thread; after that the stored reply marks the conversation.
		clear(r.threads)
	}
	r.threads[threadRef{in.Chat, replyThread(in)}] = true
}

// enqueue queues an item for the agent, unless it is queued already (a
// stored message found again by a scan); it reports whether it queued it.
func (r *chatRouter) enqueue(w *chatWorker, it chatItem) bool {
	r.remember(it.in)
	id := it.in.MsgID
	r.mu.Lock()
	if id != "" && w.queued[id] {
		r.mu.Unlock()
		return false
	}
	if id != "" {
		if len(w.queued) >= maxTakenMessages {
			clear(w.queued) // a long-lived worker: forget the oldest with the rest
		}
		w.queued[id] = true
	}
	r.mu.Unlock()
	if !w.pending.TryPush(it) {
		r.log.Error("too many messages wait for the group's agent; this one stays stored and is answered later",
			"group", w.group.Folder, "waiting", w.pending.Len())
		r.dequeued(w, id)
		return false
	}
	r.metrics.ChatQueued.Inc()
	return true
}

// dequeued forgets that message id is queued on w.
func (r *chatRouter) dequeued(w *chatWorker, id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(w.queued, id)
}

// inConversation reports whether in is a reply in a thread that is a
// conversation with the agent (it was asked there, or answered there
// before a restart): people go on there without mentioning the bot again.
func (r *chatRouter) inConversation(ctx context.Context, in channels.Inbound) bool {
	if in.Thread == "" {
		return false
	}
	r.mu.Lock()
	known := r.threads[threadRef{in.Chat, in.Thread}]
	r.mu.Unlock()
	if known {
		return true
	}
	msgs, err := r.store.ThreadMessages(ctx, in.Chat, in.Thread)
	if err != nil {
		r.log.Warn("look up thread", "chat", in.Chat, "thread", in.Thread, "err", err)
		return false
	}
	for _, m := range msgs {
		if m.Direction == store.Outbound && m.UserID == agentUser {
			return true
		}
	}
	return false
}

// agentUser is who the agent's replies are stored as.
const agentUser = "nanohost"

// requeueUnprocessed queues, in arrival order, the messages a previous
// instance stored but did not finish with.
func (r *chatRouter) requeueUnprocessed(ctx context.Context) error {
	r.hold(true)
	defer r.hold(false)
	return r.takeWaiting(ctx)
}

// takeWaiting queues, in arrival order, the stored messages nobody has
// answered of the groups this replica holds or can take (every group, on
// one host); those already queued here stay as they are.
func (r *chatRouter) takeWaiting(ctx context.Context) error {
	msgs, err := r.store.UnprocessedMessages(ctx)
	if err != nil {
		return err
	}
	for _, m := range msgs {
		g, ok := r.groups.byChatID(m.ChatID)
		ch, err := r.endpoints.channelFor(m.ChatID)
		if !ok || err != nil {
			r.log.Warn("dropping a stored message nobody can answer (no group or channel for its chat)", "chat", m.ChatID, "msg", m.ChannelMsgID)
			if _, err := r.store.MarkMessageProcessed(ctx, m.ChatID, m.ChannelMsgID); err != nil {
				r.log.Warn("mark message processed", "chat", m.ChatID, "err", err)
			}
			continue
		}
		if !r.holds(ctx, g) {
			continue // another replica answers for the group
		}
		queued := r.enqueue(r.worker(g), chatItem{ch: ch, stored: true, in: channels.Inbound{
			Kind: channels.KindMessage, Channel: ch.Name(), Chat: m.ChatID, Thread: m.ThreadTS,
			User: m.UserID, Text: m.Text, MsgID: m.ChannelMsgID, At: m.TS,
		}})
		if queued {
			r.log.Info("answering a stored message nobody answered yet", "chat", m.ChatID, "msg", m.ChannelMsgID, "group", g.Folder)
		}
	}
	return nil
}

// worker is the group's worker, started on first use with the group's
// conversation (which resumes the agent session recorded before a restart).
func (r *chatRouter) worker(g store.Group) *chatWorker {
	r.mu.Lock()
	defer r.mu.Unlock()
	w, ok := r.workers[g.Folder]
	if ok {
		return w
	}
	w = &chatWorker{group: g, pending: queue.New[chatItem](chatQueueSize), queued: map[string]bool{},
		after: r.leaving[g.Folder], done: make(chan struct{})}
	w.ctx, w.cancel = context.WithCancel(r.ctx)
	r.workers[g.Folder] = w
	if !r.holding {
		r.startLocked(w)
	}
	return w
}

// openConversation opens the group's conversation, resuming the agent
// session recorded last — by this process, an earlier one, or another
// replica that held the group before.
func (r *chatRouter) openConversation(g store.Group) Conversation {
	sid, err := r.store.GetSession(r.ctx, g.Folder, chatThreadKey)
	if err != nil {
		sid = "" // no conversation recorded yet
	}
	if sid != "" {
		r.log.Debug("the group's conversation resumes its agent session", "group", g.Folder, "session", sid)
	}
	return r.agents.Conversation(g.Folder, r.env.of(g.Folder), sid)
}

// hold stops new workers from starting (on) or starts every worker that
// waited (off).
func (r *chatRouter) hold(on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.holding = on
	if !on {
		for _, w := range r.workers {
			r.startLocked(w)
		}
	}
}

func (r *chatRouter) startLocked(w *chatWorker) {
	if !w.started && !r.stopped {
		w.started = true
		r.wg.Go(func() { r.loop(w) })
	}
}

func (r *chatRouter) loop(w *chatWorker) {
	defer close(w.done)
	if w.after != nil {
		select {
		case <-w.after:
		case <-w.ctx.Done():
			return
		}
	}
	w.conv = r.openConversation(w.group)
	defer w.conv.Close()
	for {
		select {
		case <-w.ctx.Done():
			r.metrics.ChatQueued.Sub(float64(len(w.pending.TakeAll())))
			return
		case <-w.pending.Ready():
		}
		batch := w.pending.TakeAll()
		r.metrics.ChatQueued.Sub(float64(len(batch)))
		for _, part := range byThread(batch) {
			// Let go (another replica holds the group) or stopping, as
			// the select may pick a ready queue over an ended ctx: what
			// is left stays stored for whoever answers next, and its
			// agent is asked nothing more here.
			if w.ctx.Err() != nil {
				return
			}
			r.answer(w.ctx, w, part)
		}
	}
}

// byThread splits a batch into runs of consecutive messages of one thread,
// so each reply goes to the thread its messages came from; an isolated
// prompt is a run of its own.
func byThread(batch []chatItem) [][]chatItem {
	var out [][]chatItem
	for _, it := range batch {
		n := len(out)
		if n > 0 && replyThread(out[n-1][0].in) == replyThread(it.in) && out[n-1][0].in.Chat == it.in.Chat &&
			isolatedTask(it.in.MsgID) == "" && isolatedTask(out[n-1][0].in.MsgID) == "" {
			out[n-1] = append(out[n-1], it)
			continue
		}
		out = append(out, []chatItem{it})
	}
	return out
}

// answer sends a thread's messages to the group's agent and posts its
// reply; then the messages are processed. If the host stops first, they
// stay unprocessed and are answered after the restart.
func (r *chatRouter) answer(ctx context.Context, w *chatWorker, items []chatItem) {
	g, first := w.group, items[0]
	thread := replyThread(first.in)
	var prompt strings.Builder
	for _, it := range items {
		fmt.Fprintf(&prompt, "%s: %s\n", nonEmpty(it.in.User, "user"), it.in.Text)
	}
	conv, task := w.conv, isolatedTask(first.in.MsgID)
	if task != "" {
		// A task's isolated prompt: a fresh session of the group's agent,
		// closed after its answer; the group's session is not touched.
		conv = r.agents.Conversation(g.Folder+"-"+task, r.env.of(g.Folder), "")
		defer conv.Close()
		prompt.Reset()
		prompt.WriteString(first.in.Text)
	}
	reply, err := conv.Send(ctx, prompt.String(), r.timeout)
	if ctx.Err() != nil {
		return
	}
	text := ""
	if err != nil {
		r.log.Error("agent reply", "group", g.Folder, "err", err)
		text = "Sorry — the agent could not answer: " + err.Error()
	} else {
		text = cleanReply(reply.Text)
		if reply.SessionID != "" && task == "" {
			if err := r.store.SetSession(ctx, g.Folder, chatThreadKey, reply.SessionID); err != nil {
				r.log.Warn("record agent session", "group", g.Folder, "err", err)
			}
		}
	}
	if !r.stillHolds(ctx, g) {
		return // another replica took the group over: the messages are its to answer
	}
	replyID := ""
	if text != "" {
		// An answer the agent gave is posted even if the host is stopping
		// meanwhile (stop waits a little for it); otherwise it is asked
		// again after the restart.
		out := report.NewPatient(first.ch, r.backoff, r.log.With("group", g.Folder))
		replyID, err = out.Post(r.deliveryCtx, first.in.Chat, thread, replyMessage(items, text))
		if err != nil {
			r.log.Error("post agent reply; the messages are answered again after a restart", "group", g.Folder, "chat", first.in.Chat, "err", err)
			return
		}
	}
	r.processed(ctx, items, replyID, thread, text)
}

// replyMessage is the agent's reply to items, keyed by the last of them;
// when any was taken from the store the channel looks for the reply
// before posting it, in case a process that died posted it already.
func replyMessage(items []chatItem, text string) channels.Message {
	m := channels.Message{Text: text, AnswerTo: items[len(items)-1].in.MsgID}
	for _, it := range items {
		m.MayHaveLanded = m.MayHaveLanded || (it.stored && m.AnswerTo != "")
	}
	return m
}

// processed marks items answered and records the reply. Marked first,
// recorded second: the only window for a repeated answer is between the
// post and this write.
func (r *chatRouter) processed(ctx context.Context, items []chatItem, replyID, thread, text string) {
	bg := context.WithoutCancel(ctx)
	for _, it := range items {
		if it.in.MsgID == "" {
			continue
		}
		if _, err := r.store.MarkMessageProcessed(bg, it.in.Chat, it.in.MsgID); err != nil {
			r.log.Warn("mark message processed", "chat", it.in.Chat, "msg", it.in.MsgID, "err", err)
		}
	}
	if replyID == "" {
		return
	}
	chat := items[0].in.Chat
	_, err := r.store.SaveMessage(bg, store.Message{
		ChatID: chat, ChannelMsgID: replyID, ThreadTS: thread, UserID: agentUser, Text: text,
		TS: time.Now(), Direction: store.Outbound, ProcessedAt: time.Now(),
	})
	if err != nil {
		r.log.Warn("store agent reply", "chat", chat, "err", err)
	}
}

// chatStopWait bounds how long shutdown waits for replies in flight.
const chatStopWait = 10 * time.Second

// stop ends the workers (closing their conversations) and waits a little
// for replies in flight; what is not answered by then is answered after
// the restart.
func (r *chatRouter) stop() {
	r.mu.Lock()
	r.stopped = true
	r.mu.Unlock()
	r.cancel()
	stopped := make(chan struct{})
	go func() { r.wg.Wait(); close(stopped) }()
	select {
	case <-stopped:
		r.releaseGroups()
	case <-time.After(chatStopWait):
		r.log.Warn("chat replies still in flight at shutdown; they are answered after the restart")
	}
}

var (
	internalBlock = regexp.MustCompile(`(?s)<internal>.*?</internal>`)
	outcomeTag    = regexp.MustCompile(`(?m)^\s*\[(outcome|preferred_label|next|suggested_next_ids|context)[:.][^\]\n]*\]\s*$`)
)

// stripInternal removes the agent's <internal>…</internal> notes to itself.
func stripInternal(s string) string {
	return strings.TrimSpace(internalBlock.ReplaceAllString(s, ""))
}

// cleanReply is what of an agent's answer goes to chat: no internal notes,
// no pipeline outcome tags.
func cleanReply(s string) string {
	return strings.TrimSpace(outcomeTag.ReplaceAllString(stripInternal(s), ""))
}

func orNow(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now()
	}
	return t
}

// triggered reports whether in should wake g's agent: a mention when the
// trigger is "@mention"; the trigger word anywhere in the text otherwise.
// The console is one person's own terminal, so every message there counts.
func triggered(g store.Group, in channels.Inbound) bool {
	if in.Kind == channels.KindMention || in.Channel == "console" {
		return true
	}
	trig := strings.TrimSpace(g.Trigger)
	if trig == "" || trig == "@mention" {
		return false
	}
	re, err := regexp.Compile(`(?i)(^|\W)` + regexp.QuoteMeta(strings.TrimPrefix(trig, "@")) + `($|\W)`)
	return err == nil && re.MatchString(in.Text)
}

// replyThread is where a reply to in goes: its thread, or a new thread
// under it when it was posted at the top level.
func replyThread(in channels.Inbound) string {
	if in.Thread != "" || strings.HasPrefix(in.MsgID, promptKeyPrefix) {
		return in.Thread // a scheduled prompt is no chat message: its reply stands on its own
	}
	return in.MsgID
}
