package slack

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	slackgo "github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"
)

// settleTime is how long an envelope waits before the worker takes it.
// Slack spreads envelopes over the app's connections, so two sent an
// instant apart (two replies in a thread, two clicks on a prompt) can be
// read in either order; held this long, the ones of a conversation are
// handed over in the order people acted, by Slack's clock.
const settleTime = 150 * time.Millisecond

// workQueue is the queue between the socket readers (which must never
// wait, or acks would be late) and the worker, holding at most max jobs
// (the readers check full before they acknowledge). It hands jobs over in
// arrival order, except that within a conversation a job Slack stamped
// earlier goes before one stamped later.
type workQueue struct {
	mu    sync.Mutex
	items []job
	max   int
	wake  chan struct{}
}

func newWorkQueue(max int) *workQueue {
	if max <= 0 {
		max = DefaultMaxWaiting
	}
	return &workQueue{max: max, wake: make(chan struct{}, 1)}
}

func (q *workQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}

// full reports whether the queue holds max jobs.
func (q *workQueue) full() bool { return q.len() >= q.max }

func (q *workQueue) push(j job) {
	j.arrived = time.Now()
	q.mu.Lock()
	q.items = append(q.items, j)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *workQueue) pop(ctx context.Context) (job, bool) {
	for {
		q.mu.Lock()
		wait := time.Duration(-1)
		if len(q.items) > 0 {
			first := q.items[0]
			if wait = settleTime - time.Since(first.arrived); wait <= 0 {
				i := q.earliestLike(0)
				j := q.items[i]
				q.items = append(q.items[:i], q.items[i+1:]...)
				q.mu.Unlock()
				return j, true
			}
		}
		q.mu.Unlock()
		if wait < 0 {
			wait = time.Hour // nothing queued: push wakes us
		}
		t := time.NewTimer(wait)
		select {
		case <-q.wake:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return job{}, false
		}
		t.Stop()
	}
}

// earliestLike returns the queued job of items[i]'s conversation that
// Slack stamped earliest (i itself when it has no stamp).
func (q *workQueue) earliestLike(i int) int {
	best := i
	if q.items[i].chat == "" || q.items[i].ts == "" {
		return i
	}
	for k, j := range q.items {
		if j.chat == q.items[best].chat && j.ts != "" && tsBefore(j.ts, q.items[best].ts) {
			best = k
		}
	}
	return best
}

// slackTime is where and when, by Slack's clock, the person acted: a
// message's ts, a click's action_ts.
func slackTime(ev socketmode.Event) (chat, ts string) {
	switch data := ev.Data.(type) {
	case slackevents.EventsAPIEvent:
		switch e := data.InnerEvent.Data.(type) {
		case *slackevents.MessageEvent:
			return e.Channel, e.TimeStamp
		case *slackevents.AppMentionEvent:
			return e.Channel, e.TimeStamp
		}
	case slackgo.InteractionCallback:
		if len(data.ActionCallback.BlockActions) > 0 {
			return firstNonEmpty(data.Container.ChannelID, data.Channel.ID), data.ActionCallback.BlockActions[0].ActionTs
		}
	}
	return "", ""
}

// tsBefore reports whether Slack timestamp a ("1700000000.000123") is
// earlier than b.
func tsBefore(a, b string) bool {
	as, af, _ := strings.Cut(a, ".")
	bs, bf, _ := strings.Cut(b, ".")
	ai, _ := strconv.ParseInt(as, 10, 64)
	bi, _ := strconv.ParseInt(bs, 10, 64)
	if ai != bi {
		return ai < bi
	}
	pad := func(f string) string { return (f + "000000")[:6] }
	return pad(af) < pad(bf)
}
