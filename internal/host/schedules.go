package host

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"nanohost/internal/channels"
	"nanohost/internal/config"
	"nanohost/internal/runlog"
	"nanohost/internal/runs"
	"nanohost/internal/schedule"
	"nanohost/internal/store"
)

// endpointSchedule is who starts the runs of scheduled tasks and webhooks:
// they were authorized when they were made (or configured), so the runs
// service lets them control runs; they never answer gates.
const endpointSchedule = "schedule"

// tasks are the host's scheduled tasks: made, changed and listed by agents
// (IPC), people (chat, the dashboard, the CLI) and the configuration, and
// fired by the scheduler (schedule.Firer). Every change goes through here,
// so the rules are the same from every side.
type tasks struct {
	store     *store.Store
	runs      *runs.Service
	groups    *groupIndex
	workflows workflows
	chats     *chatRouter
	endpoints *endpoints
	loc       *time.Location
	now       func() time.Time
	log       *slog.Logger
	// wake tells the scheduler a task changed (nil before it runs).
	wake func()
}

// TaskError refuses a task as asked: the text says what to change.
type TaskError struct{ Reason string }

func (e *TaskError) Error() string { return e.Reason }

func refuseTask(format string, args ...any) error {
	return &TaskError{Reason: fmt.Sprintf(format, args...)}
}

// newTaskID is a fresh task id: task-<8 hex>.
func newTaskID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "task-" + hex.EncodeToString(b[:])
}

// prepare checks t as a new or changed task and sets its defaults and its
// next run. Group and Chat must be authorized already.
func (ts *tasks) prepare(t *schedule.Task) error {
	t.Prompt = strings.TrimSpace(t.Prompt)
	switch {
	case t.Pipeline != "" && t.DOT != "":
		return refuseTask("give a pipeline by name or as DOT, not both")
	case !t.IsPipeline() && t.Prompt == "":
		return refuseTask("a task needs a prompt for the agent, or a pipeline to run")
	case t.IsPipeline() && t.Prompt != "":
		return refuseTask("a task runs a prompt or a pipeline, not both")
	}
	if t.Pipeline != "" {
		if _, err := ts.workflows.find(t.Group, t.Pipeline); err != nil {
			return refuseTask("%v", err)
		}
	}
	if err := runs.Inputs(t.Inputs).Check(); err != nil {
		return refuseTask("%v", err)
	}
	switch t.ContextMode {
	case "":
		t.ContextMode = schedule.Isolated
	case schedule.Group, schedule.Isolated:
	default:
		return refuseTask("context_mode %q is not group or isolated", t.ContextMode)
	}
	switch t.CatchUp {
	case "":
		t.CatchUp = schedule.CatchUpOnce
	case schedule.CatchUpOnce, schedule.CatchUpSkip:
	default:
		return refuseTask("catch_up %q is not once or skip", t.CatchUp)
	}
	spec, err := schedule.Parse(t.Type, t.Value, ts.loc)
	if err != nil {
		return refuseTask("%v", err)
	}
	next, ok := spec.First(ts.now())
	if ok && next.IsZero() {
		return refuseTask("%s never comes (no such date): give one that does", t.Value)
	}
	if !ok {
		return refuseTask("%s is in the past (%s): give a time to come", t.Value, ts.loc)
	}
	t.NextRun = next
	if t.Status == "" || t.Status == schedule.Completed {
		t.Status = schedule.Active
	}
	return nil
}

// create stores a new task.
func (ts *tasks) create(ctx context.Context, t schedule.Task) (schedule.Task, error) {
	if t.ID == "" {
		t.ID = newTaskID()
	}
	t.Status = ""
	if err := ts.prepare(&t); err != nil {
		return t, err
	}
	t.CreatedAt = ts.now()
	if err := ts.store.CreateTask(ctx, t); err != nil {
		if errors.Is(err, store.ErrExists) {
			return t, refuseTask("a task %s exists already: choose another id, or update it", t.ID)
		}
		return t, err
	}
	ts.changed()
	ts.log.Info("task scheduled", "task", t.ID, "group", t.Group, "chat", t.Chat, "by", t.CreatedBy, "next", t.NextRun)
	return t, nil
}

func (ts *tasks) changed() {
	if ts.wake != nil {
		ts.wake()
	}
}

// get is the task id, as the group actor may see it: its own, or any for
// the main group.
func (ts *tasks) get(ctx context.Context, actor store.Group, id string) (schedule.Task, error) {
	t, err := ts.store.GetTask(ctx, strings.TrimSpace(id))
	if errors.Is(err, store.ErrNotFound) || (err == nil && !actor.IsMain && t.Group != actor.Folder) {
		return schedule.Task{}, refuseTask("there is no task %s here (list the tasks to see their ids)", id)
	}
	return t, err
}

// pause stops a task from firing until it is resumed.
func (ts *tasks) pause(ctx context.Context, actor store.Group, id string) (schedule.Task, error) {
	t, err := ts.get(ctx, actor, id)
	if err != nil {
		return t, err
	}
	t.Status, t.Reason = schedule.Paused, ""
	return t, ts.save(ctx, t)
}

// resume lets a paused task fire again, from its next time after now.
func (ts *tasks) resume(ctx context.Context, actor store.Group, id string) (schedule.Task, error) {
	t, err := ts.get(ctx, actor, id)
	if err != nil {
		return t, err
	}
	if t.Status == schedule.Completed {
		return t, refuseTask("task %s ran its one time already: schedule a new one", t.ID)
	}
	if _, ok := ts.groups.get(t.Group); !ok {
		return t, refuseTask("task %s belongs to group %s, which is no longer registered", t.ID, t.Group)
	}
	t.Status, t.Reason = schedule.Active, ""
	if err := ts.prepare(&t); err != nil {
		return t, err
	}
	return t, ts.save(ctx, t)
}

// cancel removes a task.
func (ts *tasks) cancel(ctx context.Context, actor store.Group, id string) (schedule.Task, error) {
	t, err := ts.get(ctx, actor, id)
	if err != nil {
		return t, err
	}
	if err := ts.store.DeleteTask(ctx, t.ID); err != nil {
		return t, err
	}
	ts.changed()
	ts.log.Info("task cancelled", "task", t.ID, "by", actor.Folder)
	return t, nil
}

// taskUpdate is what update_task may change (nil: unchanged).
type taskUpdate struct {
	Prompt, Type, Value *string
}

// update changes a task's prompt or schedule.
func (ts *tasks) update(ctx context.Context, actor store.Group, id string, u taskUpdate) (schedule.Task, error) {
	t, err := ts.get(ctx, actor, id)
	if err != nil {
		return t, err
	}
	if u.Prompt != nil {
		if t.IsPipeline() {
			return t, refuseTask("task %s runs a pipeline: it has no prompt to change", t.ID)
		}
		t.Prompt = *u.Prompt
	}
	if u.Type != nil {
		t.Type = schedule.Type(*u.Type)
	}
	if u.Value != nil {
		t.Value = *u.Value
	}
	paused := t.Status == schedule.Paused
	if err := ts.prepare(&t); err != nil {
		return t, err
	}
	if paused {
		t.Status = schedule.Paused
	}
	return t, ts.save(ctx, t)
}

func (ts *tasks) save(ctx context.Context, t schedule.Task) error {
	if err := ts.store.SaveTask(ctx, t); err != nil {
		return err
	}
	ts.changed()
	return nil
}

// list is what actor may see: its own tasks, or every task for the main
// group.
func (ts *tasks) list(ctx context.Context, actor store.Group) ([]schedule.Task, error) {
	if actor.IsMain {
		return ts.store.ListTasks(ctx, "")
	}
	return ts.store.ListTasks(ctx, actor.Folder)
}

// Fire implements schedule.Firer: a pipeline run (its id derived from the
// fire, so a fire done again starts nothing new), or a prompt for the
// agent — in the group's conversation (keyed by the fire), or in a fresh
// session of its own.
func (ts *tasks) Fire(ctx context.Context, f schedule.Fire) (schedule.Result, error) {
	t := f.Task
	g, ok := ts.groups.get(t.Group)
	if !ok {
		t.Status, t.Reason = schedule.Paused, runlog.TaskGroupGone(t.Group)
		if err := ts.store.SaveTask(context.WithoutCancel(ctx), t); err != nil {
			ts.log.Warn("pause a task whose group is gone", "task", t.ID, "err", err)
		}
		return schedule.Result{}, errors.New(t.Reason)
	}
	key := "fire:" + t.ID + "@" + strconv.FormatInt(f.Due.UnixMilli(), 10)
	if t.IsPipeline() {
		file, src := "pipeline.dot", []byte(t.DOT)
		if t.Pipeline != "" {
			var err error
			if file, src, err = ts.workflows.read(g.Folder, t.Pipeline); err != nil {
				return schedule.Result{}, err
			}
		}
		run, _, err := ts.runs.Start(ctx, runs.StartRequest{
			ID: runs.KeyedRunID(key, f.Due), Group: g.Folder, Chat: t.Chat, File: file, Source: src, Inputs: t.Inputs,
		}, runs.Principal{Endpoint: endpointSchedule, User: "task:" + t.ID})
		if err != nil {
			return schedule.Result{}, err
		}
		return schedule.Result{RunID: run.ID}, nil
	}
	ch, err := ts.endpoints.channelFor(t.Chat)
	if err != nil {
		return schedule.Result{}, err
	}
	text := runlog.ScheduledPrompt(t.ID, t.Prompt)
	target := g
	if owner, ok := ts.groups.byChatID(t.Chat); ok {
		target = owner
	}
	if t.ContextMode != schedule.Group {
		key = isolatedKey(t.ID, key)
	}
	// Stored as the chat's message keyed by the fire, and answered once by
	// the replica holding the group, as every message is: a fire done
	// again after its replica died stores nothing new, and a reply posted
	// by a replica that died before recording it is found, not posted
	// again (channels.Message.MayHaveLanded).
	if _, err := ts.chats.prompt(ctx, target, ch, t.Chat, key, "task:"+t.ID, text); err != nil {
		return schedule.Result{}, err
	}
	return schedule.Result{Text: runlog.PromptGiven}, nil
}

// newScheduler makes the scheduler that fires ts's due tasks, each fire
// claimed by a lease among the replicas (owner is this one).
func newScheduler(ts *tasks, st schedule.Store, leases schedule.Leases, owner string, log *slog.Logger) (*schedule.Scheduler, error) {
	sched, err := schedule.New(schedule.Config{
		Store: st, Firer: ts, Leases: leases, Owner: owner, Loc: ts.loc, Now: ts.now,
		Logger: log.With("component", "schedule"),
	})
	if err != nil {
		return nil, err
	}
	ts.wake = sched.Wake
	return sched, nil
}

// syncConfig stores nanohost.yaml's schedules as tasks of origin
// config (id config-<name>), replacing the ones an earlier start stored
// and removing those no longer configured. A task that keeps its schedule
// keeps its next run, so a restart neither repeats nor skips a fire.
func (ts *tasks) syncConfig(ctx context.Context, schedules []config.Schedule) error {
	stored, err := ts.store.ListTasks(ctx, "")
	if err != nil {
		return err
	}
	old := map[string]schedule.Task{}
	for _, t := range stored {
		if t.Origin == "config" {
			old[t.ID] = t
		}
	}
	var errs []error
	for _, c := range schedules {
		t, err := ts.fromConfig(c)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		prev, had := old[t.ID]
		delete(old, t.ID)
		if !had {
			if _, err := ts.create(ctx, t); err != nil {
				errs = append(errs, fmt.Errorf("schedule %s: %w", c.Name, err))
			}
			continue
		}
		next := prev.NextRun
		if err := ts.prepare(&t); err != nil {
			errs = append(errs, fmt.Errorf("schedule %s: %w", c.Name, err))
			continue
		}
		if prev.Type == t.Type && prev.Value == t.Value {
			t.NextRun, t.Status = next, prev.Status
		}
		if err := ts.store.SaveTask(ctx, t); err != nil {
			errs = append(errs, err)
		}
	}
	for id := range old {
		if err := ts.store.DeleteTask(ctx, id); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// fromConfig is a configured schedule as a task (not yet checked).
func (ts *tasks) fromConfig(c config.Schedule) (schedule.Task, error) {
	g, ok := ts.groups.get(c.Group)
	if !ok {
		return schedule.Task{}, fmt.Errorf("schedule %s: group %q is not configured", c.Name, c.Group)
	}
	typ, value, err := schedule.ParseWhen(c.When)
	if err != nil {
		return schedule.Task{}, fmt.Errorf("schedule %s: %w", c.Name, err)
	}
	chat := g.ChatID
	if c.Chat != "" {
		chat = normalizeChat(c.Chat)
	}
	return schedule.Task{
		ID: "config-" + c.Name, Group: g.Folder, Chat: chat, Prompt: c.Prompt, Pipeline: c.Pipeline, Inputs: c.Inputs,
		ContextMode: schedule.ContextMode(c.ContextMode), CatchUp: schedule.CatchUp(c.CatchUp),
		Type: typ, Value: value, CreatedBy: "config", Origin: "config",
	}, nil
}

// commandSchedule executes a /schedule command in chat: tasks of this
// chat's group, made and changed by whoever may start runs here.
func (ts *tasks) command(ctx context.Context, in channels.Inbound, g store.Group, sc channels.ScheduleCommand, reply, private func(string)) {
	now := ts.now()
	if sc.Action == "list" {
		list, err := ts.list(ctx, g)
		if err != nil {
			private(runlog.Refused(err.Error()))
			return
		}
		reply(ts.listText(list, now))
		return
	}
	if err := ts.runs.MayControl(ctx, in.Who(), in.Chat); err != nil {
		private("✋ " + strings.TrimPrefix(err.Error(), runs.ErrNotAllowed.Error()+": "))
		return
	}
	var t schedule.Task
	var err error
	switch sc.Action {
	case "create":
		typ, value, perr := schedule.ParseWhen(sc.When)
		if perr != nil {
			private(runlog.Refused(perr.Error()))
			return
		}
		t, err = ts.create(ctx, schedule.Task{
			Group: g.Folder, Chat: in.Chat, Prompt: sc.Prompt, Pipeline: sc.Pipeline, Inputs: sc.Inputs,
			ContextMode: schedule.Group, Type: typ, Value: value, CreatedBy: in.User, Origin: "chat",
		})
		if err == nil {
			reply(runlog.TaskScheduled(t.ID, runlog.TaskWhat(t.Prompt, t.Pipeline, t.Inputs), runlog.When(t.NextRun, now, ts.loc)))
		}
	case "pause":
		if t, err = ts.pause(ctx, g, sc.TaskID); err == nil {
			reply(runlog.TaskPaused(t.ID))
		}
	case "resume":
		if t, err = ts.resume(ctx, g, sc.TaskID); err == nil {
			reply(runlog.TaskResumed(t.ID, runlog.When(t.NextRun, now, ts.loc)))
		}
	case "cancel":
		if t, err = ts.cancel(ctx, g, sc.TaskID); err == nil {
			reply(runlog.TaskCancelled(t.ID))
		}
	}
	if err != nil {
		ts.log.Info("schedule command refused", "user", in.User, "chat", in.Chat, "action", sc.Action, "reason", err)
		private(runlog.Refused(err.Error()))
	}
}

// listText is /schedule list's answer.
func (ts *tasks) listText(list []schedule.Task, now time.Time) string {
	if len(list) == 0 {
		return runlog.NoTasks
	}
	var lines []string
	for _, t := range list {
		next := ""
		if t.Status == schedule.Active {
			next = runlog.When(t.NextRun, now, ts.loc)
		}
		state := string(t.Status)
		if t.Reason != "" {
			state = t.Reason
		}
		lines = append(lines, runlog.TaskLine(t.ID, runlog.TaskWhat(t.Prompt, t.Pipeline, t.Inputs), whenText(t), state, next))
	}
	return runlog.TaskList(lines)
}

// whenText is a task's schedule as people write it in chat.
func whenText(t schedule.Task) string {
	switch t.Type {
	case schedule.Interval:
		return runlog.EveryMS(t.Value)
	case schedule.Once:
		return runlog.At(t.Value)
	}
	return t.Value
}

// webTasks are the tasks as the dashboard changes them (web.Schedules):
// the dashboard's operators act as the main group does (on every task).
type webTasks struct{ ts *tasks }

func (w webTasks) operator(ctx context.Context, who runs.Principal) (store.Group, error) {
	if err := w.ts.runs.MayControl(ctx, who, ""); err != nil {
		return store.Group{}, err
	}
	return store.Group{Folder: "web", IsMain: true}, nil
}

// PauseTask implements web.Schedules.
func (w webTasks) PauseTask(ctx context.Context, id string, who runs.Principal) error {
	g, err := w.operator(ctx, who)
	if err == nil {
		_, err = w.ts.pause(ctx, g, id)
	}
	return err
}

// ResumeTask implements web.Schedules.
func (w webTasks) ResumeTask(ctx context.Context, id string, who runs.Principal) error {
	g, err := w.operator(ctx, who)
	if err == nil {
		_, err = w.ts.resume(ctx, g, id)
	}
	return err
}

// Location implements web.Schedules.
func (w webTasks) Location() *time.Location { return w.ts.loc }
