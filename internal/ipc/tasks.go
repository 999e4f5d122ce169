package ipc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// NanoClaw's scheduled-task requests, with its exact wire names and
// shapes (its v1 src/ipc.ts), so its agents' habits carry over. Its files
// carry no "v" or "request_id": the answer goes to responses/<file name>.
const (
	TypeScheduleTask  Type = "schedule_task"
	TypeListTasks     Type = "list_tasks"
	TypePauseTask     Type = "pause_task"
	TypeResumeTask    Type = "resume_task"
	TypeCancelTask    Type = "cancel_task"
	TypeUpdateTask    Type = "update_task"
	TypeRegisterGroup Type = "register_group"
	TypeRefreshGroups Type = "refresh_groups"
)

func init() {
	for _, t := range []Type{TypeScheduleTask, TypeListTasks, TypePauseTask, TypeResumeTask, TypeCancelTask,
		TypeUpdateTask, TypeRegisterGroup, TypeRefreshGroups} {
		queueOf[t] = QueueTasks
	}
}

// taskTypes are the types whose files may lack a request_id (NanoClaw's).
func nanoClawType(t Type) bool {
	switch t {
	case TypeScheduleTask, TypeListTasks, TypePauseTask, TypeResumeTask, TypeCancelTask, TypeUpdateTask,
		TypeRegisterGroup, TypeRefreshGroups:
		return true
	}
	return false
}

// ScheduleTask asks for a scheduled task: a prompt for the agent, or (a
// nanohost addition) a pipeline by name or DOT, with inputs.
type ScheduleTask struct {
	Envelope
	TaskID        string `json:"taskId,omitempty"`
	Prompt        string `json:"prompt,omitempty"`
	ScheduleType  string `json:"schedule_type"`
	ScheduleValue string `json:"schedule_value"`
	ContextMode   string `json:"context_mode,omitempty"`
	TargetJid     string `json:"targetJid,omitempty"`
	Script        string `json:"script,omitempty"`
	CreatedBy     string `json:"createdBy,omitempty"`
	Timestamp     string `json:"timestamp,omitempty"`
	// nanohost's additions.
	Pipeline string            `json:"pipeline,omitempty"`
	DOT      string            `json:"dot,omitempty"`
	Inputs   map[string]string `json:"inputs,omitempty"`
	CatchUp  string            `json:"catch_up,omitempty"`
}

// TaskRef is pause_task, resume_task, cancel_task and list_tasks: a task
// id (none for list_tasks), plus NanoClaw's informational fields, which
// authorization never reads.
type TaskRef struct {
	Envelope
	TaskID      string `json:"taskId,omitempty"`
	GroupFolder string `json:"groupFolder,omitempty"`
	IsMain      bool   `json:"isMain,omitempty"`
	Timestamp   string `json:"timestamp,omitempty"`
}

// UpdateTask changes a task's prompt or schedule.
type UpdateTask struct {
	Envelope
	TaskID        string  `json:"taskId"`
	Prompt        *string `json:"prompt,omitempty"`
	Script        *string `json:"script,omitempty"`
	ScheduleType  *string `json:"schedule_type,omitempty"`
	ScheduleValue *string `json:"schedule_value,omitempty"`
	Timestamp     string  `json:"timestamp,omitempty"`
}

// RegisterGroup registers a chat as a group (the main group only).
type RegisterGroup struct {
	Envelope
	Jid             string         `json:"jid"`
	Name            string         `json:"name"`
	Folder          string         `json:"folder"`
	Trigger         string         `json:"trigger"`
	RequiresTrigger *bool          `json:"requiresTrigger,omitempty"`
	ContainerConfig map[string]any `json:"containerConfig,omitempty"`
}

// TaskInfo is a task as list_tasks answers it (NanoClaw's snapshot shape).
type TaskInfo struct {
	ID            string    `json:"id"`
	GroupFolder   string    `json:"groupFolder"`
	Prompt        string    `json:"prompt,omitempty"`
	Pipeline      string    `json:"pipeline,omitempty"`
	ScheduleType  string    `json:"schedule_type"`
	ScheduleValue string    `json:"schedule_value"`
	Status        string    `json:"status"`
	NextRun       string    `json:"next_run,omitempty"`
	LastRun       string    `json:"last_run,omitempty"`
	LastResult    string    `json:"last_result,omitempty"`
	ContextMode   string    `json:"context_mode,omitempty"`
	At            time.Time `json:"-"`
}

// TaskHost is what the watcher asks to act on task requests; the actor
// is the group folder the file was found in.
type TaskHost interface {
	ScheduleTask(ctx context.Context, actor, chat string, r *ScheduleTask) (TaskInfo, error)
	TaskChat(ctx context.Context, actor, taskID string) (chat string, err error)
	ChangeTask(ctx context.Context, actor string, typ Type, taskID string, u *UpdateTask) (TaskInfo, error)
	ListTasks(ctx context.Context, actor string) ([]TaskInfo, error)
	RegisterGroup(ctx context.Context, actor string, r *RegisterGroup) error
}

func (r *ScheduleTask) validate() error {
	switch {
	case r.Script != "":
		return errors.New(`"script" is not supported by this host: put the check in the prompt, or schedule a pipeline whose first stage is a tool node`)
	case strings.TrimSpace(r.ScheduleType) == "" || strings.TrimSpace(r.ScheduleValue) == "":
		return errors.New(`"schedule_type" (cron, interval or once) and "schedule_value" are required`)
	case strings.TrimSpace(r.Prompt) == "" && r.Pipeline == "" && r.DOT == "":
		return errors.New(`give a "prompt" for the agent (or a "pipeline" to run)`)
	}
	if r.TaskID != "" {
		if err := ValidRequestID(r.TaskID); err != nil {
			return fmt.Errorf("taskId: %w", err)
		}
	}
	return nil
}

func validTaskID(id string) error {
	if id == "" {
		return errors.New(`"taskId" is required (list_tasks shows the ids)`)
	}
	if len(id) > 128 || strings.ContainsAny(id, "/\\\x00") {
		return fmt.Errorf("taskId %q is not a task id", id)
	}
	return nil
}

// dispatchTask handles NanoClaw's task requests for group.
func (w *Watcher) dispatchTask(ctx context.Context, group string, req Request) verdict {
	th, ok := w.cfg.Host.(TaskHost)
	if !ok {
		return rejected(req, "this host does not schedule tasks")
	}
	switch r := req.(type) {
	case *ScheduleTask:
		d, v, ok := w.admit(r, group, ActionStartPipeline, r.TargetJid, w.starts, "scheduled tasks")
		if !ok {
			return v
		}
		info, err := th.ScheduleTask(ctx, group, d.Chat, r)
		if v, bad := hostError(r, err); bad {
			w.starts.refund(group)
			return v
		}
		v = accepted(r)
		v.resp.Task, v.resp.Chat = &info, d.Chat
		return v
	case *TaskRef:
		if r.Type == TypeRefreshGroups {
			if g, ok := w.cfg.Registry.LookupGroup(group); !ok || !g.Main {
				return unauthorized(r, "only the main group may refresh groups", fmt.Sprintf("group %q (not main) asked to refresh groups", group))
			}
			return accepted(r) // the host reads its groups from the store on every request
		}
		if r.Type == TypeListTasks {
			list, err := th.ListTasks(ctx, group)
			if v, bad := hostError(r, err); bad {
				return v
			}
			v := accepted(r)
			v.resp.Tasks = list
			if v.resp.Tasks == nil {
				v.resp.Tasks = []TaskInfo{}
			}
			return v
		}
		return w.changeTask(ctx, th, group, r, r.TaskID, nil)
	case *UpdateTask:
		return w.changeTask(ctx, th, group, r, r.TaskID, r)
	case *RegisterGroup:
		g, ok := w.cfg.Registry.LookupGroup(group)
		if !ok || !g.Main {
			return unauthorized(r, "only the main group may register groups", fmt.Sprintf("group %q (not main) asked to register %q", group, r.Folder))
		}
		if v, bad := hostError(r, th.RegisterGroup(ctx, group, r)); bad {
			return v
		}
		return accepted(r)
	}
	return rejected(req, fmt.Sprintf("request type %q is not handled", req.Meta().Type))
}

// changeTask pauses, resumes, cancels or updates a task: the main group's
// or the task's own group's to do.
func (w *Watcher) changeTask(ctx context.Context, th TaskHost, group string, req Request, id string, u *UpdateTask) verdict {
	if err := validTaskID(id); err != nil {
		return rejected(req, err.Error())
	}
	chat, err := th.TaskChat(ctx, group, id)
	if v, bad := hostError(req, err); bad {
		return v
	}
	if d := Authorize(group, ActionStartPipeline, Target{Chat: chat}, w.cfg.Registry); !d.Allowed {
		return unauthorized(req, fmt.Sprintf("task %q is not this group's", id), d.Reason)
	}
	info, err := th.ChangeTask(ctx, group, req.Meta().Type, id, u)
	if v, bad := hostError(req, err); bad {
		return v
	}
	v := accepted(req)
	v.resp.Task = &info
	return v
}
