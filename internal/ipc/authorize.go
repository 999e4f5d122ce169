package ipc

import "fmt"

// Group is a registered group: a folder (its identity, and the name of its
// IPC directory) bound to the chat it lives in.
type Group struct {
	Folder string
	Chat   string
	// Main marks the administrator group, which may act on every registered chat.
	Main bool
}

// Registry answers who is registered. The host's group table implements it.
type Registry interface {
	// LookupGroup returns the group registered under folder.
	LookupGroup(folder string) (Group, bool)
	// ChatRegistered reports whether the host serves chat.
	ChatRegistered(chat string) bool
}

// Action is what a request wants to do.
type Action string

const (
	ActionStartPipeline  Action = "start_pipeline"
	ActionCancelPipeline Action = "cancel_pipeline"
	ActionPipelineStatus Action = "pipeline_status"
	ActionSendMessage    Action = "send_message"
)

// Target is the chat an action touches: the chat a request names (start,
// send), or the chat a run belongs to (cancel, status). "" means the
// actor's own chat.
type Target struct {
	Chat string
}

// Decision is Authorize's answer. Chat is the resolved target when allowed.
type Decision struct {
	Allowed bool
	Reason  string
	Chat    string
}

func deny(format string, args ...any) Decision {
	return Decision{Reason: fmt.Sprintf(format, args...)}
}

// Authorize is the one place that decides whether the group in folder actor
// (the directory a request was found in — never anything the request says
// about itself) may perform action on target:
//
//   - an unsafe or unregistered folder may do nothing;
//   - a group may act on its own chat;
//   - the main group may also act on any other registered chat;
//   - nobody may act on a chat the host does not serve.
func Authorize(actor string, action Action, target Target, reg Registry) Decision {
	if err := ValidGroupName(actor); err != nil {
		return deny("%v", err)
	}
	switch action {
	case ActionStartPipeline, ActionCancelPipeline, ActionPipelineStatus, ActionSendMessage:
	default:
		return deny("unknown action %q", action)
	}
	group, ok := reg.LookupGroup(actor)
	if !ok {
		return deny("group %q is not registered with the host", actor)
	}
	chat := target.Chat
	if chat == "" {
		chat = group.Chat
	}
	switch {
	case chat == "":
		return deny("group %q has no chat registered", actor)
	case chat == group.Chat:
		return Decision{Allowed: true, Chat: chat}
	case !group.Main:
		return deny("group %q may only %s in its own chat, not in %q", actor, describe(action), chat)
	case !reg.ChatRegistered(chat):
		return deny("chat %q is not registered with the host", chat)
	}
	return Decision{Allowed: true, Chat: chat}
}

func describe(a Action) string {
	switch a {
	case ActionStartPipeline:
		return "start pipelines"
	case ActionCancelPipeline:
		return "cancel runs"
	case ActionPipelineStatus:
		return "query runs"
	}
	return "send messages"
}
