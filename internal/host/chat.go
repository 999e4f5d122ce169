package host

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"nanohost/internal/channels"
	"nanohost/internal/container"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/store"
)

// chatThreadKey is the store's session key of a group's main conversation;
// chatBackendThread is the full-fidelity thread it lives in, in the backend.
const (
	chatThreadKey     = ""
	chatBackendThread = "main"
)

// SessionResumer is implemented by backends that can resume an agent
// session an earlier host process recorded (container.Backend).
type SessionResumer interface {
	ResumeSession(runID, thread, sessionID string)
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
	h      *Host
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	workers map[string]*chatWorker
	threads map[threadRef]bool // conversations the agent takes part in
	wg      sync.WaitGroup
}

type threadRef struct{ chat, thread string }

// maxRememberedThreads bounds the in-memory set of conversation threads.
const maxRememberedThreads = 4096

type chatWorker struct {
	group store.Group
	wake  chan struct{}

	mu      sync.Mutex
	pending []chatItem
	busy    bool
}

type chatItem struct {
	ch channels.Channel
	in channels.Inbound
}

func newChatRouter(h *Host) *chatRouter {
	return &chatRouter{h: h, workers: map[string]*chatWorker{}, threads: map[threadRef]bool{}}
}

// chatRunID is the backend "run" a group's conversation lives in.
func chatRunID(folder string) string { return "chat-" + folder }

// handle stores an inbound message and queues it for the group's agent when
// it is addressed to the agent: it triggers it (a mention, the trigger
// word, any console line), or it is a reply in a thread that is a
// conversation with the agent. Messages queued while the agent works go
// to the same live container, in order, as follow-ups.
func (r *chatRouter) handle(ctx context.Context, ch channels.Channel, in channels.Inbound) {
	g, ok := r.h.groups.byChatID(in.Chat)
	if !ok || strings.TrimSpace(in.Text) == "" {
		return
	}
	w := r.worker(g)
	wanted := triggered(g, in) || r.inConversation(ctx, in)
	if in.MsgID != "" {
		m := store.Message{
			ChatID: in.Chat, ChannelMsgID: in.MsgID, ThreadTS: in.Thread, UserID: in.User, Text: in.Text,
			TS: orNow(in.At), Direction: store.Inbound,
		}
		if !wanted {
			m.ProcessedAt = time.Now() // nothing to do for it, now or after a restart
		}
		saved, err := r.h.store.SaveMessage(ctx, m)
		if err != nil {
			r.h.log.Warn("store inbound message", "chat", in.Chat, "err", err)
		} else if !saved {
			return // a redelivery of a message we already have
		}
	}
	if wanted {
		r.enqueue(w, chatItem{ch, in})
	}
}

// enqueue queues an item for the agent; its thread becomes a conversation
// with the agent.
func (r *chatRouter) enqueue(w *chatWorker, it chatItem) {
	r.mu.Lock()
	if len(r.threads) >= maxRememberedThreads {
		// The memory only matters until the agent's first answer in a
		// thread; after that the stored reply marks the conversation.
		clear(r.threads)
	}
	r.threads[threadRef{it.in.Chat, replyThread(it.in)}] = true
	r.mu.Unlock()
	w.push(r.h, it)
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
	msgs, err := r.h.store.ThreadMessages(ctx, in.Chat, in.Thread)
	if err != nil {
		r.h.log.Warn("look up thread", "chat", in.Chat, "thread", in.Thread, "err", err)
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
	msgs, err := r.h.store.UnprocessedMessages(ctx)
	if err != nil {
		return err
	}
	for _, m := range msgs {
		g, ok := r.h.groups.byChatID(m.ChatID)
		ch, err := r.h.channelFor(m.ChatID)
		if !ok || err != nil {
			r.h.log.Warn("dropping a stored message nobody can answer (no group or channel for its chat)", "chat", m.ChatID, "msg", m.ChannelMsgID)
			if _, err := r.h.store.MarkMessageProcessed(ctx, m.ChatID, m.ChannelMsgID); err != nil {
				r.h.log.Warn("mark message processed", "chat", m.ChatID, "err", err)
			}
			continue
		}
		r.h.log.Info("answering a message left unanswered by the previous instance", "chat", m.ChatID, "msg", m.ChannelMsgID, "group", g.Folder)
		r.enqueue(r.worker(g), chatItem{ch, channels.Inbound{
			Kind: channels.KindMessage, Channel: ch.Name(), Chat: m.ChatID, Thread: m.ThreadTS,
			User: m.UserID, Text: m.Text, MsgID: m.ChannelMsgID, At: m.TS,
		}})
	}
	return nil
}

func (r *chatRouter) worker(g store.Group) *chatWorker {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ctx == nil {
		r.ctx, r.cancel = context.WithCancel(r.h.ctx)
	}
	w, ok := r.workers[g.Folder]
	if !ok {
		w = &chatWorker{group: g, wake: make(chan struct{}, 1)}
		r.workers[g.Folder] = w
		runID := chatRunID(g.Folder)
		r.h.backend.BindRun(runID, container.RunEnv{
			Group: g.Folder, Workspace: r.h.GroupDir(g.Folder), ExtraMounts: r.h.groupMounts(g.Folder),
		})
		// The conversation goes on where it was before a restart.
		if res, ok := r.h.backend.(SessionResumer); ok {
			if sid, err := r.h.store.GetSession(r.ctx, g.Folder, chatThreadKey); err == nil {
				res.ResumeSession(runID, chatBackendThread, sid)
			}
		}
		r.wg.Add(1)
		go func() { defer r.wg.Done(); r.loop(r.ctx, w) }()
	}
	return w
}

func (w *chatWorker) push(h *Host, it chatItem) {
	w.mu.Lock()
	w.pending = append(w.pending, it)
	w.mu.Unlock()
	h.metrics.ChatQueued.Inc()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (r *chatRouter) loop(ctx context.Context, w *chatWorker) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		}
		for {
			batch := w.take()
			if len(batch) == 0 {
				break
			}
			r.h.metrics.ChatQueued.Sub(float64(len(batch)))
			for _, part := range byThread(batch) {
				r.answer(ctx, w.group, part)
			}
		}
		w.mu.Lock()
		w.busy = false
		w.mu.Unlock()
	}
}

func (w *chatWorker) take() []chatItem {
	w.mu.Lock()
	defer w.mu.Unlock()
	batch := w.pending
	w.pending = nil
	w.busy = len(batch) > 0 || w.busy
	return batch
}

// byThread splits a batch into runs of consecutive messages of one thread,
// so each reply goes to the thread its messages came from.
func byThread(batch []chatItem) [][]chatItem {
	var out [][]chatItem
	for _, it := range batch {
		n := len(out)
		if n > 0 && replyThread(out[n-1][0].in) == replyThread(it.in) && out[n-1][0].in.Chat == it.in.Chat {
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
func (r *chatRouter) answer(ctx context.Context, g store.Group, items []chatItem) {
	first := items[0]
	thread := replyThread(first.in)
	var prompt strings.Builder
	for _, it := range items {
		fmt.Fprintf(&prompt, "%s: %s\n", nonEmpty(it.in.User, "user"), it.in.Text)
	}
	res, err := r.h.backend.Run(ctx, engine.Request{
		Kind: engine.KindCodergen, RunID: chatRunID(g.Folder), NodeID: "chat", Attempt: 1, Visit: 1,
		Prompt: prompt.String(), Fidelity: "full", ThreadKey: chatBackendThread,
		Timeout: r.h.cfg.Runtime.NodeTimeout,
	})
	if ctx.Err() != nil {
		return
	}
	text := ""
	if err != nil {
		r.h.log.Error("agent reply", "group", g.Folder, "err", err)
		text = "Sorry — the agent could not answer: " + err.Error()
	} else {
		text = cleanReply(res.Text)
		if res.SessionID != "" {
			if err := r.h.store.SetSession(ctx, g.Folder, chatThreadKey, res.SessionID); err != nil {
				r.h.log.Warn("record agent session", "group", g.Folder, "err", err)
			}
		}
	}
	replyID := ""
	if text != "" {
		// An answer the agent gave is posted even if the host is stopping
		// meanwhile (stop waits a little for it); otherwise it is asked
		// again after the restart.
		out := newPatientChannel(first.ch, r.h.deliveryBackoff, r.h.log.With("group", g.Folder))
		replyID, err = out.Post(r.h.deliveryCtx, first.in.Chat, thread, channels.Message{Text: text})
		if err != nil {
			r.h.log.Error("post agent reply; the messages are answered again after a restart", "group", g.Folder, "chat", first.in.Chat, "err", err)
			return
		}
	}
	// Marked first, recorded second: the only window for a repeated answer
	// is between the post and this write.
	for _, it := range items {
		if it.in.MsgID == "" {
			continue
		}
		if _, err := r.h.store.MarkMessageProcessed(context.WithoutCancel(ctx), it.in.Chat, it.in.MsgID); err != nil {
			r.h.log.Warn("mark message processed", "chat", it.in.Chat, "msg", it.in.MsgID, "err", err)
		}
	}
	if replyID != "" {
		_, err := r.h.store.SaveMessage(context.WithoutCancel(ctx), store.Message{
			ChatID: first.in.Chat, ChannelMsgID: replyID, ThreadTS: thread, UserID: agentUser, Text: text,
			TS: time.Now(), Direction: store.Outbound, ProcessedAt: time.Now(),
		})
		if err != nil {
			r.h.log.Warn("store agent reply", "chat", first.in.Chat, "err", err)
		}
	}
}

// stop ends the workers (their live containers are closed by the backend's
// Close) and waits a little for replies in flight.
func (r *chatRouter) stop() {
	r.mu.Lock()
	if r.cancel != nil {
		r.cancel()
	}
	r.mu.Unlock()
	waitAtMost(&r.wg, 10*time.Second)
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
