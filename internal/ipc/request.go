package ipc

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"unicode/utf8"
)

// Version is the request and response format version this package speaks.
const Version = 1

// Type names a request.
type Type string

const (
	TypeStartPipeline  Type = "start_pipeline"
	TypeCancelPipeline Type = "cancel_pipeline"
	TypePipelineStatus Type = "pipeline_status"
	TypeSendMessage    Type = "send_message"
)

// queueOf says which directory each request type belongs in.
var queueOf = map[Type]Queue{
	TypeStartPipeline:  QueueTasks,
	TypeCancelPipeline: QueueTasks,
	TypePipelineStatus: QueueTasks,
	TypeSendMessage:    QueueMessages,
}

// QueueFor returns the directory a request of type t is written to.
func QueueFor(t Type) (Queue, bool) {
	q, ok := queueOf[t]
	return q, ok
}

// Verbosity is how much of a run is posted to chat.
type Verbosity string

const (
	VerbosityMinimal  Verbosity = "minimal"
	VerbosityStandard Verbosity = "standard"
	VerbosityVerbose  Verbosity = "verbose"
)

// WorkspacePrefix is where the group's workspace is mounted in the
// container; a `pipeline` path may be given relative to it or absolute under it.
const WorkspacePrefix = "/workspace/group/"

// Envelope is the part every request has.
type Envelope struct {
	V         int    `json:"v"`
	Type      Type   `json:"type"`
	RequestID string `json:"request_id"`
}

// Request is one decoded, validated request.
type Request interface {
	Meta() Envelope
}

// Meta returns the envelope.
func (e Envelope) Meta() Envelope { return e }

// StartPipeline asks the host to run a DOT pipeline. Exactly one of DOT
// (inline source) and Pipeline (a .dot file in the group's workspace) is set.
type StartPipeline struct {
	Envelope
	DOT       string    `json:"dot,omitempty"`
	Pipeline  string    `json:"pipeline,omitempty"`
	File      string    `json:"file,omitempty"` // name shown in diagnostics for inline DOT
	Goal      string    `json:"goal,omitempty"`
	Verbosity Verbosity `json:"verbosity,omitempty"`
	Chat      string    `json:"chat,omitempty"`   // default: the group's own chat
	Thread    string    `json:"thread,omitempty"` // the conversation asking: told where the run's own thread is
	// Inputs are the run's inputs, each in its context as input.<key>.
	Inputs map[string]string `json:"inputs,omitempty"`
}

// CancelPipeline asks the host to stop a run.
type CancelPipeline struct {
	Envelope
	RunID string `json:"run_id"`
}

// PipelineStatus asks where a run is.
type PipelineStatus struct {
	Envelope
	RunID string `json:"run_id"`
}

// SendMessage asks the host to post text to a chat.
type SendMessage struct {
	Envelope
	Text   string `json:"text"`
	Thread string `json:"thread,omitempty"`
	Chat   string `json:"chat,omitempty"` // default: the group's own chat
}

// Limits bound what one request may carry.
type Limits struct {
	FileBytes    int64 // a request file, before parsing
	DOTBytes     int   // inline or referenced DOT source
	MessageChars int   // send_message text, in characters (Slack rejects more than 40,000)
	GoalChars    int
}

// DefaultLimits are the sizes the host accepts unless configured otherwise.
var DefaultLimits = Limits{
	FileBytes:    2 << 20,
	DOTBytes:     1 << 20,
	MessageChars: 40000,
	GoalChars:    4000,
}

// Decode parses and validates a request found in queue. Unknown fields are
// ignored so newer agents can talk to older hosts; fields of the wrong JSON
// type, unknown request types and missing required fields are errors that
// say what to write instead.
func Decode(queue Queue, data []byte, lim Limits) (Request, error) {
	return DecodeFile(queue, "", data, lim)
}

// DecodeFile is Decode for a file named stem.json: a NanoClaw request,
// which carries no request_id, is answered under stem.
func DecodeFile(queue Queue, stem string, data []byte, lim Limits) (Request, error) {
	var env Envelope
	if err := unmarshal(data, &env); err != nil {
		return nil, err
	}
	if env.RequestID == "" && nanoClawType(env.Type) {
		env.RequestID = stem
	}
	if env.V == 0 {
		env.V = Version // files from before versioning carry no "v"
	}
	if env.V != Version {
		return nil, fmt.Errorf("unsupported request version v=%d: this host speaks v=%d", env.V, Version)
	}
	if err := ValidRequestID(env.RequestID); err != nil {
		return nil, err
	}
	want, known := queueOf[env.Type]
	if !known {
		return nil, fmt.Errorf("unknown request type %q: use one of start_pipeline, cancel_pipeline, pipeline_status, schedule_task, list_tasks, pause_task, resume_task, update_task, cancel_task, register_group (in tasks/) or send_message (in messages/)", env.Type)
	}
	if want != queue {
		return nil, fmt.Errorf("%s requests go in %s/, not %s/", env.Type, want, queue)
	}
	req, err := decodeBody(env, data)
	if err != nil {
		return nil, err
	}
	if err := validate(req, lim); err != nil {
		return nil, fmt.Errorf("%s: %w", env.Type, err)
	}
	return req, nil
}

func decodeBody(env Envelope, data []byte) (Request, error) {
	var req Request
	switch env.Type {
	case TypeStartPipeline:
		req = &StartPipeline{}
	case TypeCancelPipeline:
		req = &CancelPipeline{}
	case TypePipelineStatus:
		req = &PipelineStatus{}
	case TypeSendMessage:
		req = &SendMessage{}
	case TypeScheduleTask:
		req = &ScheduleTask{}
	case TypeUpdateTask:
		req = &UpdateTask{}
	case TypeRegisterGroup:
		req = &RegisterGroup{}
	case TypeListTasks, TypePauseTask, TypeResumeTask, TypeCancelTask, TypeRefreshGroups:
		req = &TaskRef{}
	}
	if err := unmarshal(data, req); err != nil {
		return nil, err
	}
	// Keep the normalised envelope (version defaulted).
	switch r := req.(type) {
	case *StartPipeline:
		r.Envelope = env
	case *CancelPipeline:
		r.Envelope = env
	case *PipelineStatus:
		r.Envelope = env
	case *SendMessage:
		r.Envelope = env
	case *ScheduleTask:
		r.Envelope = env
	case *UpdateTask:
		r.Envelope = env
	case *RegisterGroup:
		r.Envelope = env
	case *TaskRef:
		r.Envelope = env
	}
	return req, nil
}

// unmarshal decodes JSON and turns the decoder's errors into ones an agent
// can act on.
func unmarshal(data []byte, v any) error {
	err := json.Unmarshal(data, v)
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return fmt.Errorf("field %q must be a %s, not a JSON %s", typeErr.Field, jsonKind(typeErr.Type.Kind().String()), typeErr.Value)
	case errors.As(err, &typeErr):
		return fmt.Errorf("a request must be a JSON object, not a JSON %s", typeErr.Value)
	case errors.As(err, &syntaxErr):
		return fmt.Errorf("not valid JSON at byte %d: %v", syntaxErr.Offset, err)
	}
	return fmt.Errorf("not valid JSON: %w", err)
}

func jsonKind(goKind string) string {
	switch goKind {
	case "int", "int64":
		return "number"
	case "struct", "map":
		return "object"
	}
	return goKind
}

func validate(req Request, lim Limits) error {
	switch r := req.(type) {
	case *StartPipeline:
		return r.validate(lim)
	case *CancelPipeline:
		return validRunID(r.RunID)
	case *PipelineStatus:
		return validRunID(r.RunID)
	case *SendMessage:
		return r.validate(lim)
	case *ScheduleTask:
		return r.validate()
	case *UpdateTask:
		if r.Script != nil && *r.Script != "" {
			return errors.New(`"script" is not supported by this host`)
		}
		return validTaskID(r.TaskID)
	case *RegisterGroup:
		if r.Jid == "" || r.Folder == "" {
			return errors.New(`"jid" and "folder" are required`)
		}
		return ValidGroupName(r.Folder)
	}
	return nil
}

func (r *StartPipeline) validate(lim Limits) error {
	switch {
	case r.DOT == "" && r.Pipeline == "":
		return errors.New(`give the pipeline as "dot" (the DOT source) or "pipeline" (a .dot file in your workspace)`)
	case r.DOT != "" && r.Pipeline != "":
		return errors.New(`give either "dot" or "pipeline", not both`)
	case len(r.DOT) > lim.DOTBytes:
		return fmt.Errorf("the DOT source is %d bytes; the limit is %d: split the work into smaller pipelines", len(r.DOT), lim.DOTBytes)
	case utf8.RuneCountInString(r.Goal) > lim.GoalChars:
		return fmt.Errorf("goal is longer than %d characters: put details in the node prompts", lim.GoalChars)
	}
	if r.Pipeline != "" {
		clean, err := WorkspaceRelPath(r.Pipeline)
		if err != nil {
			return err
		}
		r.Pipeline = clean
	}
	switch r.Verbosity {
	case "":
		r.Verbosity = VerbosityStandard
	case VerbosityMinimal, VerbosityStandard, VerbosityVerbose:
	default:
		return fmt.Errorf("verbosity %q is not one of minimal, standard, verbose", r.Verbosity)
	}
	return nil
}

// WorkspaceRelPath turns a `pipeline` reference into a clean path relative
// to the group's workspace, refusing anything that would leave it.
func WorkspaceRelPath(p string) (string, error) {
	rel := p
	if strings.HasPrefix(p, "/") {
		var ok bool
		if rel, ok = strings.CutPrefix(p, WorkspacePrefix); !ok {
			return "", fmt.Errorf("pipeline %q is outside your workspace: give a path relative to %s", p, WorkspacePrefix)
		}
	}
	clean := path.Clean(rel)
	if clean == ".." || strings.HasPrefix(clean, "../") || strings.Contains(rel, "\x00") {
		return "", fmt.Errorf("pipeline %q leaves your workspace: give a path inside %s", p, WorkspacePrefix)
	}
	if !strings.HasSuffix(clean, ".dot") {
		return "", fmt.Errorf("pipeline %q is not a .dot file", p)
	}
	return clean, nil
}

func validRunID(id string) error {
	if id == "" {
		return errors.New(`"run_id" is required (the id from the start_pipeline response)`)
	}
	if len(id) > 200 || strings.ContainsAny(id, "/\\\x00") {
		return fmt.Errorf("run_id %q is not a run id", id)
	}
	return nil
}

func (r *SendMessage) validate(lim Limits) error {
	if strings.TrimSpace(r.Text) == "" {
		return errors.New(`"text" is required and must not be blank`)
	}
	if n := utf8.RuneCountInString(r.Text); n > lim.MessageChars {
		return fmt.Errorf("text is %d characters; chat messages are limited to %d: send it as several messages or attach a file in your workspace", n, lim.MessageChars)
	}
	return nil
}
