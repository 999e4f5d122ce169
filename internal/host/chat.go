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

// chatThreadKey names a group's main conversation: in the container
// backend it is the full-fidelity thread whose live container the group's
// messages go to; in the store, the session key.
const chatThreadKey = ""

// chatRouter turns chat messages into agent work: one worker per group, so
// a group has at most one agent container at a time. Messages that arrive
// while the agent works queue behind it and are sent, in order, to the same
// live container (and agent session) as follow-ups.
type chatRouter struct {
	h      *Host
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	workers map[string]*chatWorker
	wg      sync.WaitGroup
}

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
	return &chatRouter{h: h, workers: map[string]*chatWorker{}}
}

// chatRunID is the backend "run" a group's conversation lives in.
func chatRunID(folder string) string { return "chat-" + folder }

// handle stores an inbound message and queues it for the group's agent when
// it triggers the agent, or when the agent is already working (then it is
// a follow-up to the conversation in progress).
func (r *chatRouter) handle(ctx context.Context, ch channels.Channel, in channels.Inbound) {
	g, ok := r.h.groups.byChatID(in.Chat)
	if !ok || strings.TrimSpace(in.Text) == "" {
		return
	}
	if in.MsgID != "" {
		saved, err := r.h.store.SaveMessage(ctx, store.Message{
			ChatID: in.Chat, ChannelMsgID: in.MsgID, ThreadTS: in.Thread, UserID: in.User, Text: in.Text,
			TS: orNow(in.At), Direction: store.Inbound,
		})
		if err != nil {
			r.h.log.Warn("store inbound message", "chat", in.Chat, "err", err)
		} else if !saved {
			return // a redelivery of a message we already have
		}
	}
	w := r.worker(g)
	w.mu.Lock()
	if !triggered(g, in) && !w.busy && len(w.pending) == 0 {
		w.mu.Unlock()
		return
	}
	w.pending = append(w.pending, chatItem{ch, in})
	w.mu.Unlock()
	r.h.metrics.ChatQueued.Inc()
	select {
	case w.wake <- struct{}{}:
	default:
	}
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
		r.h.backend.BindRun(chatRunID(g.Folder), container.RunEnv{
			Group: g.Folder, Workspace: r.h.GroupDir(g.Folder), ExtraMounts: r.h.groupMounts(g.Folder),
		})
		r.wg.Add(1)
		go func() { defer r.wg.Done(); r.loop(r.ctx, w) }()
	}
	return w
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

// answer sends a thread's messages to the group's agent and posts its reply.
func (r *chatRouter) answer(ctx context.Context, g store.Group, items []chatItem) {
	first := items[0]
	thread := replyThread(first.in)
	var prompt strings.Builder
	for _, it := range items {
		fmt.Fprintf(&prompt, "%s: %s\n", nonEmpty(it.in.User, "user"), it.in.Text)
	}
	res, err := r.h.backend.Run(ctx, engine.Request{
		Kind: engine.KindCodergen, RunID: chatRunID(g.Folder), NodeID: "chat", Attempt: 1, Visit: 1,
		Prompt: prompt.String(), Fidelity: "full", ThreadKey: "main",
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
	if text == "" {
		return
	}
	id, err := first.ch.Post(ctx, first.in.Chat, thread, channels.Message{Text: text})
	if err != nil {
		r.h.log.Error("post agent reply", "group", g.Folder, "chat", first.in.Chat, "err", err)
		return
	}
	if id != "" {
		_, _ = r.h.store.SaveMessage(ctx, store.Message{
			ChatID: first.in.Chat, ChannelMsgID: id, ThreadTS: thread, UserID: "nanohost", Text: text, TS: time.Now(), Direction: store.Outbound,
		})
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
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
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
