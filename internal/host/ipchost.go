package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"nanohost/internal/channels"
	"nanohost/internal/config"
	"nanohost/internal/ipc"
	"nanohost/internal/ipc/sqlprocessed"
	"nanohost/internal/runs"
	"nanohost/internal/schedule"
	"nanohost/internal/store"
)

// ipcHost is the runs service as the agents' IPC sees it (ipc.Host): the
// IPC wire types are mapped to and from the runs service's here, and
// nowhere else. The watcher has already decided which group asks and that
// it may.
type ipcHost struct {
	runs      *runs.Service
	store     *store.Store
	endpoints *endpoints
	tasks     *tasks
	registrar *groupRegistrar // register_group
	log       *slog.Logger
}

// agent is who an IPC request acts as.
func agent(group string) runs.Principal {
	return runs.Principal{Endpoint: endpointIPC, User: "agent:" + group}
}

// StartPipeline starts a run for an agent. The request id is an
// idempotency key: a request offered again after a crash returns the run it
// started the first time.
func (x ipcHost) StartPipeline(ctx context.Context, req ipc.StartRequest) (ipc.StartResult, error) {
	if rec, ok, err := x.store.Processed(ctx, req.Group, req.RequestID); err == nil && ok && rec.Type == string(ipc.TypeStartPipeline) {
		var prev ipc.StartResult
		if json.Unmarshal(rec.Response, &prev) == nil && prev.RunID != "" {
			return prev, nil
		}
	}
	run, diags, err := x.runs.Start(ctx, runs.StartRequest{
		Group: req.Group, Chat: req.Chat, Thread: req.Thread, File: req.File,
		Source: req.DOT, Goal: req.Goal, Verbosity: runs.Verbosity(req.Verbosity),
		Inputs: runs.Inputs(req.Inputs),
	}, agent(req.Group))
	var invalid *runs.InvalidError
	var inputs *runs.InputError
	switch {
	case errors.As(err, &invalid):
		return ipc.StartResult{}, ipc.RejectDiagnostics(invalid.Diagnostics)
	case errors.As(err, &inputs):
		return ipc.StartResult{}, &ipc.RejectError{Reason: inputs.Error()}
	}
	if err != nil {
		return ipc.StartResult{}, err
	}
	res := ipc.StartResult{RunID: run.ID, Chat: run.ChatID, Warnings: diags}
	if data, err := json.Marshal(ipc.StartResult{RunID: run.ID, Chat: run.ChatID}); err == nil {
		if _, err := x.store.MarkProcessed(ctx, req.Group, req.RequestID, string(ipc.TypeStartPipeline), data); err != nil {
			x.log.Warn("record ipc request", "group", req.Group, "request", req.RequestID, "err", err)
		}
	}
	return res, nil
}

// CancelPipeline stops a run.
func (x ipcHost) CancelPipeline(ctx context.Context, group, runID string) error {
	err := x.runs.Cancel(ctx, runID, agent(group))
	if errors.Is(err, runs.ErrNoSuchRun) {
		return fmt.Errorf("run %s: %w", runID, ipc.ErrUnknownRun)
	}
	return err
}

// PipelineStatus reports a run in the IPC's words.
func (x ipcHost) PipelineStatus(ctx context.Context, group, runID string) (ipc.RunStatus, error) {
	st, err := x.runs.Status(ctx, runID)
	if errors.Is(err, runs.ErrNoSuchRun) {
		return ipc.RunStatus{}, fmt.Errorf("run %s: %w", runID, ipc.ErrUnknownRun)
	}
	if err != nil {
		return ipc.RunStatus{}, err
	}
	run := st.Run
	out := ipc.RunStatus{
		RunID: run.ID, Group: run.GroupFolder, Chat: run.ChatID, Thread: run.ThreadTS, State: ipcState(run.Status),
		Goal: run.Goal, StartedAt: run.StartedAt, Detail: run.FailureReason, Completed: st.Completed, CurrentNode: st.Current,
	}
	if !run.FinishedAt.IsZero() {
		t := run.FinishedAt
		out.EndedAt = &t
	}
	return out, nil
}

// ipcState is a run state in the IPC protocol's words (version 1 of the
// wire format, which agents' scripts read).
func ipcState(s runs.State) string {
	switch s {
	case runs.Waiting:
		return ipc.StateWaitingHuman
	case runs.Succeeded:
		return ipc.StateCompleted
	case runs.Failed:
		return ipc.StateFailed
	case runs.Cancelled:
		return ipc.StateCancelled
	case runs.Interrupted:
		return ipc.StateInterrupted
	}
	return ipc.StateRunning
}

// SendMessage posts an agent's message to a chat.
func (x ipcHost) SendMessage(ctx context.Context, group, chat, thread, text string) error {
	ch, err := x.endpoints.channelFor(chat)
	if err != nil {
		return err
	}
	text = stripInternal(text)
	if text == "" {
		return nil
	}
	_, err = ch.Post(ctx, chat, thread, channels.Message{Text: text})
	return err
}

// newIPCWatcher watches the agents' requests under root (data/ipc) and
// hands them to host, within the limits of cfg.
func newIPCWatcher(root string, host ipcHost, groups *groupIndex, folders groupFolders, db *store.Store, cfg config.IPC, m *Metrics) (*ipc.Watcher, error) {
	rate := func(n int, per time.Duration) ipc.Rate {
		if n <= 0 {
			return ipc.Rate{}
		}
		return ipc.Rate{Burst: n, Every: per / time.Duration(n)}
	}
	return ipc.NewWatcher(ipc.Config{
		Root:        root,
		Host:        host,
		Registry:    groups,
		Processed:   sqlprocessed.Store{DB: db},
		Workspace:   folders.dir,
		Rescan:      cfg.Rescan,
		Limits:      ipc.Limits{FileBytes: cfg.MaxRequestBytes},
		StartRate:   rate(cfg.PipelinesPerHour, time.Hour),
		MessageRate: rate(cfg.MessagesPerMinute, time.Minute),
		OnRejected: func(group, file, reason string) {
			host.log.Warn("ipc request rejected", "group", group, "file", file, "reason", reason)
		},
		OnDispatch: func(_ string, typ ipc.Type, waited time.Duration) {
			m.IPCPickup.WithLabelValues(string(typ)).Observe(waited.Seconds())
		},
		Logger: host.log.With("component", "ipc"),
	})
}

// ScheduleTask makes a task for an agent (ipc.TaskHost); chat is
// authorized already.
func (x ipcHost) ScheduleTask(ctx context.Context, actor, chat string, r *ipc.ScheduleTask) (ipc.TaskInfo, error) {
	g, ok := x.tasks.groups.get(actor)
	if !ok {
		return ipc.TaskInfo{}, &ipc.RejectError{Reason: "group " + actor + " is not registered"}
	}
	t, err := x.tasks.create(ctx, schedule.Task{
		ID: r.TaskID, Group: g.Folder, Chat: chat, Prompt: r.Prompt, ContextMode: schedule.ContextMode(r.ContextMode),
		Pipeline: r.Pipeline, DOT: r.DOT, Inputs: r.Inputs, Type: schedule.Type(r.ScheduleType), Value: r.ScheduleValue,
		CatchUp: schedule.CatchUp(r.CatchUp), CreatedBy: nonEmpty(r.CreatedBy, "agent:"+actor), Origin: "ipc",
	})
	if err != nil {
		return ipc.TaskInfo{}, taskRefusal(err)
	}
	return taskInfo(t), nil
}

// TaskChat is the chat of task id, as actor may see it.
func (x ipcHost) TaskChat(ctx context.Context, actor, id string) (string, error) {
	t, err := x.tasks.get(ctx, x.actor(actor), id)
	if err != nil {
		return "", taskRefusal(err)
	}
	return t.Chat, nil
}

// ChangeTask pauses, resumes, cancels or updates a task.
func (x ipcHost) ChangeTask(ctx context.Context, actor string, typ ipc.Type, id string, u *ipc.UpdateTask) (ipc.TaskInfo, error) {
	g := x.actor(actor)
	var t schedule.Task
	var err error
	switch typ {
	case ipc.TypePauseTask:
		t, err = x.tasks.pause(ctx, g, id)
	case ipc.TypeResumeTask:
		t, err = x.tasks.resume(ctx, g, id)
	case ipc.TypeCancelTask:
		t, err = x.tasks.cancel(ctx, g, id)
	case ipc.TypeUpdateTask:
		t, err = x.tasks.update(ctx, g, id, taskUpdate{Prompt: u.Prompt, Type: u.ScheduleType, Value: u.ScheduleValue})
	default:
		err = fmt.Errorf("unknown task request %s", typ)
	}
	if err != nil {
		return ipc.TaskInfo{}, taskRefusal(err)
	}
	info := taskInfo(t)
	if typ == ipc.TypeCancelTask {
		info.Status = "cancelled"
	}
	return info, nil
}

// ListTasks is what actor may see (main: every task).
func (x ipcHost) ListTasks(ctx context.Context, actor string) ([]ipc.TaskInfo, error) {
	list, err := x.tasks.list(ctx, x.actor(actor))
	if err != nil {
		return nil, err
	}
	out := make([]ipc.TaskInfo, 0, len(list))
	for _, t := range list {
		out = append(out, taskInfo(t))
	}
	return out, nil
}

// RegisterGroup registers a chat as a group for the main group's agent;
// it never makes a group main.
func (x ipcHost) RegisterGroup(ctx context.Context, actor string, r *ipc.RegisterGroup) error {
	g := config.Group{Folder: r.Folder, Name: r.Name, Chat: r.Jid, Trigger: r.Trigger}
	if clash, ok := x.registrar.registerConflict(g); ok {
		return &ipc.RejectError{Reason: clash.Text()}
	}
	if err := x.registrar.save(ctx, g, false); err != nil {
		return err
	}
	x.log.Info("group registered by the main group's agent", "group", r.Folder, "chat", r.Jid, "by", actor)
	return x.registrar.reload(ctx)
}

func (x ipcHost) actor(folder string) store.Group {
	g, _ := x.tasks.groups.get(folder)
	return g
}

// taskRefusal makes a task's refusal the agent's answer.
func taskRefusal(err error) error {
	var te *TaskError
	if errors.As(err, &te) {
		return &ipc.RejectError{Reason: te.Reason}
	}
	return err
}

// taskInfo is a task in NanoClaw's list shape.
func taskInfo(t schedule.Task) ipc.TaskInfo {
	info := ipc.TaskInfo{
		ID: t.ID, GroupFolder: t.Group, Prompt: t.Prompt, Pipeline: t.Pipeline, ScheduleType: string(t.Type),
		ScheduleValue: t.Value, Status: string(t.Status), LastResult: t.LastResult, ContextMode: string(t.ContextMode),
	}
	if !t.NextRun.IsZero() {
		info.NextRun = t.NextRun.UTC().Format(time.RFC3339)
	}
	if !t.LastRun.IsZero() {
		info.LastRun = t.LastRun.UTC().Format(time.RFC3339)
	}
	return info
}
