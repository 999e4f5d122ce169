package runlog

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// What scheduled tasks and webhooks say to people and agents.

// ScheduledPrompt is the prompt a scheduled task gives the agent: marked,
// as NanoClaw marks it, so the agent knows nobody is waiting in the chat.
func ScheduledPrompt(taskID, prompt string) string {
	return fmt.Sprintf("[SCHEDULED TASK %s - The following message was sent automatically on a schedule, not typed by a person. "+
		"Do the work and answer in the chat.]\n%s", taskID, prompt)
}

// HookPrompt is the prompt a webhook gives the agent.
func HookPrompt(hook, prompt string) string {
	return fmt.Sprintf("[WEBHOOK %s - The following message was sent automatically by a webhook delivery, not typed by a person.]\n%s", hook, prompt)
}

// PromptGiven is a group-mode fire's result: the answer comes in the chat.
const PromptGiven = "prompt given to the group's conversation"

// TaskGroupGone is why a task whose group was removed is paused.
func TaskGroupGone(group string) string {
	return fmt.Sprintf("paused: its group %s is no longer registered", group)
}

// TaskLine is one task in a list: id, what, when next, its state.
func TaskLine(id, what, schedule, state, next string) string {
	line := fmt.Sprintf("• %s — %s — %s", id, what, schedule)
	if next != "" {
		line += " — next: " + next
	}
	if state != "" && state != "active" {
		line += " (" + state + ")"
	}
	return line
}

// TaskList is /schedule list's answer: a TaskLine a task.
func TaskList(lines []string) string {
	return strings.Join(append([]string{"Scheduled tasks:"}, lines...), "\n")
}

// EveryMS is an interval schedule (its value in milliseconds) as people
// write it in chat: "every 5m0s".
func EveryMS(ms string) string {
	if n, err := strconv.ParseInt(ms, 10, 64); err == nil {
		return "every " + (time.Duration(n) * time.Millisecond).String()
	}
	return "every " + ms
}

// At is a one-time schedule as people write it in chat.
func At(when string) string { return "at " + when }

// TaskWhat says what a task does, in a few words.
func TaskWhat(prompt, pipeline string, inputs map[string]string) string {
	if pipeline != "" {
		s := "pipeline " + pipeline
		var kv []string
		for k, v := range inputs {
			kv = append(kv, k+"="+v)
		}
		if len(kv) > 0 {
			slices.Sort(kv)
			s += " " + strings.Join(kv, " ")
		}
		return s
	}
	if prompt == "" {
		return "an inline pipeline"
	}
	p := strings.Join(strings.Fields(prompt), " ")
	if r := []rune(p); len(r) > 60 {
		p = string(r[:59]) + "…"
	}
	return fmt.Sprintf("%q", p)
}

// TaskScheduled is the chat's answer to a /schedule that made a task.
func TaskScheduled(id, what, next string) string {
	return fmt.Sprintf("Scheduled %s: %s — next: %s. (/schedule pause|resume|cancel %s)", id, what, next, id)
}

// NoTasks is /schedule list with nothing scheduled.
const NoTasks = "No scheduled tasks here. /schedule <when> <prompt…> makes one (/schedule help)."

// When formats t for a person in loc ("Mon 1 Dec 09:00 Europe/Berlin").
func When(t, now time.Time, loc *time.Location) string {
	if t.IsZero() {
		return "never"
	}
	t = t.In(loc)
	layout := "Mon 2 Jan 15:04"
	if t.Year() != now.In(loc).Year() {
		layout = "Mon 2 Jan 2006 15:04"
	}
	return t.Format(layout) + " " + loc.String()
}

// TaskPaused, TaskResumed and TaskCancelled answer /schedule pause,
// resume and cancel.
func TaskPaused(id string) string { return fmt.Sprintf("Paused %s. (/schedule resume %s)", id, id) }

func TaskResumed(id, next string) string { return fmt.Sprintf("Resumed %s — next: %s.", id, next) }

func TaskCancelled(id string) string { return fmt.Sprintf("Cancelled %s.", id) }

// PipelineOutcomePrompt tells a group's agent how a pipeline it started
// ended, in its conversation, so its next answer knows what the pipeline
// did (docs/semantics.md, "An agent's pipeline is told back").
func PipelineOutcomePrompt(runID, name, state, reason string, completed []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[PIPELINE %s - The pipeline you started, %s, has ended: %s.", runID, name, state)
	if reason != "" {
		fmt.Fprintf(&b, " Reason: %s.", reason)
	}
	if len(completed) > 0 {
		fmt.Fprintf(&b, " Stages completed: %s.", strings.Join(completed, ", "))
	}
	b.WriteString(" This message was sent automatically, not typed by a person. Tell the chat what it means, briefly.]")
	return b.String()
}
