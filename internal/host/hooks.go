package host

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
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
// it is recorded as starting with the run id it will have before anything
// starts, so a replica that takes over a delivery whose replica died
// starts the same run (or finds it started), never a second one.
type hookStarter struct {
	hooks  map[string]config.Webhook
	tasks  *tasks // groups, workflows, chats, the runs service
	store  *store.Store
	leases *lease.Keeper
	log    *slog.Logger
}

// hookWait bounds how long a delivery waits for another replica that is
// starting it before it answers 409 (retry).
const hookWait = 5 * time.Second

// Start implements hooks.Starter.
func (x hookStarter) Start(ctx context.Context, d hooks.Delivery) (hooks.Result, error) {
	id := lease.ID{Kind: lease.Hook, Key: d.Hook + "/" + d.ID}
	deadline := time.Now().Add(hookWait)
	for {
		taken, holder, err := x.leases.Take(ctx, id)
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
	defer func() {
		if err := x.leases.Release(ctx, id); err != nil {
			x.log.Warn("release a delivery's claim", "hook", d.Hook, "delivery", d.ID, "err", err)
		}
	}()
	rec, fresh, err := x.store.BeginDelivery(ctx, store.HookDelivery{
		Hook: d.Hook, ID: d.ID, Received: d.Received, Status: "starting", RunID: engine.NewRunID(d.Received),
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

// startOnce starts the delivery's run (with the id recorded for it) or
// gives its prompt (keyed by the delivery): doing it again starts nothing.
func (x hookStarter) startOnce(ctx context.Context, d hooks.Delivery, runID string) (hooks.Result, error) {
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
func (x hookStarter) target(c config.Webhook) (store.Group, string, error) {
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
func (x hookStarter) Filtered(ctx context.Context, d hooks.Delivery, why string) {
	if _, _, err := x.store.BeginDelivery(ctx, store.HookDelivery{Hook: d.Hook, ID: d.ID, Received: d.Received, Status: "filtered", Reason: why}); err != nil {
		x.log.Warn("record a filtered delivery", "hook", d.Hook, "err", err)
	}
}

// hooksHandler serves POST /hooks/{name}, or nil when none is configured.
func (h *Host) hooksHandler() http.Handler {
	if len(h.cfg.Webhooks) == 0 {
		return nil
	}
	byName := map[string]config.Webhook{}
	var list []hooks.Hook
	for _, c := range h.cfg.Webhooks {
		byName[c.Name] = c
		list = append(list, hooks.Hook{Name: c.Name, Secret: []byte(c.Secret.Reveal()), Inputs: c.Inputs, When: c.When,
			PerMinute: c.PerMinute, MaxBytes: c.MaxBytes})
	}
	starter := hookStarter{hooks: byName, tasks: h.tasks, store: h.store, leases: h.leases, log: h.log.With("component", "hooks")}
	return hooks.NewHandler(list, starter, h.tasks.now, h.log.With("component", "hooks"))
}
