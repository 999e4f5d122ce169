package runlog

import (
	"strings"
	"unicode"

	"nanohost/internal/pipeline/engine"
)

// eventNames are the kinds of events in words, for logs that show every
// event (the dashboard's "every event"): a person reads "checkpoint saved",
// not CheckpointSaved.
var eventNames = map[engine.EventType]string{
	engine.EventPipelineStarted:         "run started",
	engine.EventPipelineCompleted:       "run succeeded",
	engine.EventPipelineFailed:          "run failed",
	engine.EventPipelineResumed:         "run resumed",
	engine.EventPipelineCancelled:       "run cancelled",
	engine.EventPipelineInterrupted:     "run interrupted",
	engine.EventStageStarted:            "stage started",
	engine.EventStageCompleted:          "stage done",
	engine.EventStageFailed:             "stage failed",
	engine.EventStageRetrying:           "retrying",
	engine.EventParallelStarted:         "branches started",
	engine.EventParallelBranchStarted:   "branch started",
	engine.EventParallelBranchCompleted: "branch done",
	engine.EventParallelCompleted:       "branches done",
	engine.EventInterviewStarted:        "question asked",
	engine.EventInterviewCompleted:      "question answered",
	engine.EventInterviewTimeout:        "no answer in time",
	engine.EventCheckpointSaved:         "checkpoint saved",
	engine.EventDecision:                "route chosen",
	engine.EventWarning:                 "warning",
	engine.EventAgentResponse:           "agent replied",
	engine.EventContextUpdated:          "context updated",
	engine.EventWorkspaceChanged:        "files changed",
	engine.EventStageOutput:             "output returned",
	engine.EventChildStarted:            "child run started",
	engine.EventSteered:                 "steered",
	engine.EventToolHook:                "tool hook",
	engine.EventPullRequestOpened:       "pull request opened",
}

// EventName is the kind of an event in words ("stage started"); a type
// this version does not know is split into words ("SomethingNew" →
// "something new"), never shown raw.
func EventName(t engine.EventType) string {
	if name, ok := eventNames[t]; ok {
		return name
	}
	var b strings.Builder
	for i, r := range string(t) {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte(' ')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// WebUser is a dashboard user in words: the person at the host's own
// loopback dashboard is the local operator, a token's holder "token
// holder", a signed-in person by their name.
func WebUser(user string) string {
	switch user {
	case "", "web:local":
		return "local operator"
	case "web:token":
		return "token holder"
	}
	return strings.TrimPrefix(user, "web:")
}

// Starter is who started a run, in words, for a reader who was not there:
// a dashboard user as WebUser says with where they were, the console's
// operator, an agent by its group, a schedule or a webhook by its name, a
// chat user by their id on that chat (the dashboard cannot look a Slack
// name up). "" when nobody is recorded.
func Starter(user string) string {
	kind, name, _ := strings.Cut(user, ":")
	switch {
	case user == "":
		return ""
	case user == "console":
		return "the console's operator"
	case kind == "web":
		return WebUser(user) + " (dashboard)"
	case kind == "agent" && name != "":
		return "the agent of group " + name
	case kind == "task" && name != "":
		return "schedule " + name
	case kind == "hook" && name != "":
		return "webhook " + name
	}
	return "chat user " + user
}
