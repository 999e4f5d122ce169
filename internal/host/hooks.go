package host

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"nanohost/internal/config"
	"nanohost/internal/hooks"
	"nanohost/internal/lease"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runlog"
	"nanohost/internal/runs"
	"nanohost/internal/store"
)

// hookStarter starts what webhook deliveries ask (hooks.Starter): a
// pipeline run or a prompt for a group's agent, exactly once per delivery
// id among the replicas. A delivery is claimed by a lease of kind hook;
// it is recorded as starting, with the run id it will have and its
// inputs, before anything starts, so a replica that takes over a delivery
// whose replica died starts the same run (or finds it started), never a
// second one — on a redelivery, or by itself (finishLeft).
type hookStarter struct {
	hooks  map[string]config.Webhook
	tasks  *tasks // groups, workflows, chats, the runs service
	store  *store.Store
	leases *lease.Keeper
	log    *slog.Logger

	mu sync.Mutex
	// inFlight are the deliveries being started in this process (the
	// lease is the replica's: this keeps two of its requests apart).
	inFlight map[lease.ID]bool
}

func newHookStarter(hooks map[string]config.Webhook, ts *tasks, st *store.Store, leases *lease.Keeper, log *slog.Logger) *hookStarter {
	return &hookStarter{hooks: hooks, tasks: ts, store: st, leases: leases, log: log, inFlight: map[lease.ID]bool{}}
}

// hookWait bounds how long a delivery waits for another replica that is
// starting it before it answers 409 (retry).
const hookWait = 5 * time.Second

func deliveryLease(hook, id string) lease.ID {
	return lease.ID{Kind: lease.Hook, Key: hook + "/" + id}
}

// claim takes the delivery's lease for this process and keeps it; false
// when another replica, or another request here, holds it.
func (x *hookStarter) claim(ctx context.Context, id lease.ID) (bool, string, error) {
	x.mu.Lock()
	if x.inFlight[id] {
		x.mu.Unlock()
		return false, x.leases.Owner(), nil
	}
	x.inFlight[id] = true
	x.mu.Unlock()
	taken, holder, err := x.leases.Take(ctx, id)
	if err != nil || !taken {
		x.unclaim(ctx, id, false)
		return false, holder, err
	}
	x.leases.Keep(id, func(error) {}) // what it starts is keyed: one taken over starts nothing twice
	return true, "", nil
}

func (x *hookStarter) unclaim(ctx context.Context, id lease.ID, release bool) {
	if release {
		if err := x.leases.Release(context.WithoutCancel(ctx), id); err != nil {
			x.log.Warn("release a delivery's claim", "delivery", id.Key, "err", err)
		}
	}
	x.mu.Lock()
	delete(x.inFlight, id)
	x.mu.Unlock()
}

// Start implements hooks.Starter.
func (x *hookStarter) Start(ctx context.Context, d hooks.Delivery) (hooks.Result, error) {
	id := deliveryLease(d.Hook, d.ID)
	deadline := time.Now().Add(hookWait)
	for {
		taken, holder, err := x.claim(ctx, id)
		if err != nil {
			return hooks.Result{}, err
		}
		if taken {
			break
		}
		if time.Now().After(deadline) {
			return hooks.Result{}, &hooks.BusyError{Holder: holder}
		}
		select {
		case <-ctx.Done():
			return hooks.Result{}, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	defer x.unclaim(ctx, id, true)
	rec, fresh, err := x.store.BeginDelivery(ctx, store.HookDelivery{
		Hook: d.Hook, ID: d.ID, Received: d.Received, Status: "starting", RunID: engine.NewRunID(d.Received), Inputs: d.Inputs,
	})
	if err != nil {
		return hooks.Result{}, err
	}
	if rec.Status != "starting" {
		// Done before: a redelivery starts nothing.
		return hooks.Result{RunID: rec.RunID, Prompt: x.hooks[d.Hook].Prompt != "", Repeated: true}, nil
	}
	if !fresh {
		x.log.Info("finishing a delivery whose replica died while starting it", "hook", d.Hook, "delivery", d.ID)
	}
	return x.finish(ctx, rec)
}

// finish starts what the recorded delivery asks, with its recorded run id
// and inputs, and records how it went. The delivery's lease is held.
func (x *hookStarter) finish(ctx context.Context, rec store.HookDelivery) (hooks.Result, error) {
	d := hooks.Delivery{Hook: rec.Hook, ID: rec.ID, Inputs: rec.Inputs, Received: rec.Received}
	res, err := x.startOnce(ctx, d, rec.RunID)
	status, reason := "started", ""
	if err != nil {
		status, reason = "failed", err.Error()
	}
	if ferr := x.store.FinishDelivery(context.WithoutCancel(ctx), d.Hook, d.ID, status, reason); ferr != nil {
		x.log.Warn("record a delivery", "hook", d.Hook, "delivery", d.ID, "err", ferr)
	}
	return res, err
}

// finishLeft finishes the deliveries left starting by a replica that died
// (or by this host, before a crash): each one whose lease is free is
// claimed and finished as it was recorded, without waiting for the sender
// to deliver it again.
func (x *hookStarter) finishLeft(ctx context.Context) {
	left, err := x.store.StartingDeliveries(ctx, 50)
	if err != nil {
		if ctx.Err() == nil {
			x.log.Warn("look for deliveries left starting", "err", err)
		}
		return
	}
	for _, rec := range left {
		id := deliveryLease(rec.Hook, rec.ID)
		if taken, _, err := x.claim(ctx, id); err != nil || !taken {
			continue // being started (here or by a live replica), or the store is away: next time
		}
		// Read again under the claim: it may have been finished since.
		cur, _, err := x.store.BeginDelivery(ctx, rec)
		if err == nil && cur.Status == "starting" {
			x.log.Info("finishing a delivery a replica left starting", "hook", cur.Hook, "delivery", cur.ID, "run", cur.RunID)
			if _, err := x.finish(ctx, cur); err != nil {
				x.log.Warn("a delivery left starting could not start", "hook", cur.Hook, "delivery", cur.ID, "err", err)
			}
		}
		x.unclaim(ctx, id, true)
	}
}

// sweepDeliveries runs finishLeft at once and then after each of the
// keeper's renewal rounds (lease TTL/3), until ctx ends.
func (x *hookStarter) sweepDeliveries(ctx context.Context) {
	sweep := x.leases.Sweep(x.finishLeft)
	sweep.Now()
	sweep.Run(ctx)
}

// startOnce starts the delivery's run (with the id recorded for it) or
// gives its prompt (keyed by the delivery): doing it again starts nothing.
func (x *hookStarter) startOnce(ctx context.Context, d hooks.Delivery, runID string) (hooks.Result, error) {
	c, ok := x.hooks[d.Hook]
	if !ok {
		return hooks.Result{}, fmt.Errorf("no webhook %s", d.Hook)
	}
	g, chat, err := x.target(c)
	if err != nil {
		return hooks.Result{}, err
	}
	if c.Pipeline != "" {
		file, src, err := x.tasks.workflows.read(g.Folder, c.Pipeline)
		if err != nil {
			return hooks.Result{}, err
		}
		run, _, err := x.tasks.runs.Start(ctx, runs.StartRequest{
			ID: runID, Group: g.Folder, Chat: chat, File: file, Source: src, Inputs: d.Inputs,
		}, runs.Principal{Endpoint: endpointSchedule, User: "hook:" + d.Hook})
		if err != nil {
			return hooks.Result{}, err
		}
		return hooks.Result{RunID: run.ID}, nil
	}
	ch, err := x.tasks.endpoints.channelFor(chat)
	if err != nil {
		return hooks.Result{}, err
	}
	target := g
	if owner, ok := x.tasks.groups.byChatID(chat); ok {
		target = owner
	}
	if _, err := x.tasks.chats.prompt(ctx, target, ch, chat, "hook:"+d.Hook+"/"+d.ID, "hook:"+d.Hook, runlog.HookPrompt(d.Hook, c.Prompt)); err != nil {
		return hooks.Result{}, err
	}
	return hooks.Result{Prompt: true}, nil
}

// target is the group a hook runs in and the chat it reports to: its
// group (else the group of its chat, else the main one) and its chat
// (else the group's).
func (x *hookStarter) target(c config.Webhook) (store.Group, string, error) {
	var g store.Group
	var ok bool
	switch {
	case c.Group != "":
		g, ok = x.tasks.groups.get(c.Group)
	case c.Chat != "":
		g, ok = x.tasks.groups.byChatID(normalizeChat(c.Chat))
	}
	if !ok {
		var err error
		if g, err = x.tasks.groups.pick(""); err != nil {
			return g, "", err
		}
	}
	chat := g.ChatID
	if c.Chat != "" {
		chat = normalizeChat(c.Chat)
	}
	return g, chat, nil
}

// Filtered records a delivery its hook's when: filter dropped.
func (x *hookStarter) Filtered(ctx context.Context, d hooks.Delivery, why string) {
	if _, _, err := x.store.BeginDelivery(ctx, store.HookDelivery{Hook: d.Hook, ID: d.ID, Received: d.Received, Status: "filtered", Reason: why}); err != nil {
		x.log.Warn("record a filtered delivery", "hook", d.Hook, "err", err)
	}
}

// hookStarterFor makes the host's webhook starter (nil: none configured).
func hookStarterFor(webhooks []config.Webhook, ts *tasks, st *store.Store, leases *lease.Keeper, log *slog.Logger) *hookStarter {
	if len(webhooks) == 0 {
		return nil
	}
	byName := map[string]config.Webhook{}
	for _, c := range webhooks {
		byName[c.Name] = c
	}
	return newHookStarter(byName, ts, st, leases, log.With("component", "hooks"))
}

// hooksHandler serves POST /hooks/{name} through starter, or is nil when
// no webhook is configured (starter nil).
func hooksHandler(webhooks []config.Webhook, starter *hookStarter, st lease.Store, now func() time.Time, log *slog.Logger) http.Handler {
	if starter == nil {
		return nil
	}
	var list []hooks.Hook
	for _, c := range webhooks {
		list = append(list, hooks.Hook{Name: c.Name, Secret: []byte(c.Secret.Reveal()), Inputs: c.Inputs, When: c.When,
			PerMinute: c.PerMinute, MaxBytes: c.MaxBytes})
	}
	return hooks.NewHandler(list, starter, now, log.With("component", "hooks")).SharedRate(hookRate{st: st})
}

// hookRate is a webhook's per-minute bound among every replica
// (hooks.Rate): a hook has perMinute slots, leases of kind hook-rate that a
// delivery holds for a minute on the database's clock (never renewed), so
// the bound holds however many replicas take deliveries. A delivery probes
// the slots from one its id picks: one statement while the hook is under
// its bound, at most perMinute when it is at it (each replica's own limiter
// bounds those attempts first).
type hookRate struct{ st lease.Store }

// Allow implements hooks.Rate.
func (r hookRate) Allow(ctx context.Context, hook, delivery string, perMinute int) (bool, error) {
	if perMinute <= 0 {
		return true, nil
	}
	owner := "delivery:" + hook + "/" + delivery
	f := fnv.New32a()
	f.Write([]byte(delivery))
	first := int(f.Sum32() % uint32(perMinute))
	for i := range perMinute {
		id := lease.ID{Kind: lease.HookRate, Key: hook + "#" + strconv.Itoa((first+i)%perMinute)}
		holder, err := r.st.TakeLease(ctx, id, owner, time.Minute)
		if err != nil {
			return false, err
		}
		if holder == owner {
			return true, nil
		}
	}
	return false, nil
}
