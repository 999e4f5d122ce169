package channels

import (
	"errors"
	"fmt"
	"strings"
)

// ScheduleCommand is a parsed /schedule command.
type ScheduleCommand struct {
	// Action is create, list, pause, resume, cancel or help.
	Action string
	// TaskID names the task (pause, resume, cancel).
	TaskID string
	// When is the schedule as typed (create): a cron expression, "every
	// 30m" or "at 2026-12-01 09:00".
	When string
	// Prompt is for the group's agent; Pipeline (with Inputs) a stored
	// pipeline to run instead.
	Prompt   string
	Pipeline string
	Inputs   map[string]string
}

// ParseSchedule parses the text of a /schedule command (with or without
// the leading "/schedule").
func ParseSchedule(text string) (ScheduleCommand, error) {
	text = strings.TrimSpace(CleanPasted(text))
	if rest, ok := strings.CutPrefix(text, "/schedule"); ok {
		text = strings.TrimSpace(rest)
	}
	word, rest := cutWord(text)
	switch sub := strings.ToLower(word); sub {
	case "", "help":
		return ScheduleCommand{Action: "help"}, nil
	case "list":
		return ScheduleCommand{Action: "list"}, nil
	case "pause", "resume", "cancel":
		id, extra := cutWord(rest)
		if id == "" || extra != "" {
			return ScheduleCommand{}, fmt.Errorf("%s needs exactly one task id: /schedule %s <id> (/schedule list shows them)", sub, sub)
		}
		return ScheduleCommand{Action: sub, TaskID: id}, nil
	}
	when, what, err := cutWhen(text)
	if err != nil {
		return ScheduleCommand{}, err
	}
	sc := ScheduleCommand{Action: "create", When: when}
	if first, after := cutWord(what); strings.EqualFold(first, "pipeline") {
		name, args := cutWord(after)
		if name == "" {
			return ScheduleCommand{}, errors.New("pipeline needs a name: /schedule <when> pipeline <name> [key=value…]")
		}
		inputs, extra, err := ParseInputs(args)
		if err != nil {
			return ScheduleCommand{}, err
		}
		if extra != "" {
			return ScheduleCommand{}, fmt.Errorf("after the pipeline's name only key=value inputs are taken (got %q)", extra)
		}
		sc.Pipeline, sc.Inputs = name, inputs
		return sc, nil
	}
	if what == "" {
		return ScheduleCommand{}, errors.New("nothing to schedule: /schedule <when> <prompt…> or /schedule <when> pipeline <name>")
	}
	sc.Prompt = what
	return sc, nil
}

// cutWhen splits the schedule off the front of text: "every <duration>",
// "at <date> <time>", an @descriptor, or five cron fields.
func cutWhen(text string) (when, rest string, err error) {
	words := strings.Fields(text)
	n := 5
	switch first := strings.ToLower(firstOf(words)); {
	case first == "every":
		n = 2
	case first == "at":
		n = 3
	case strings.HasPrefix(first, "@"):
		n = 1
	}
	if len(words) < n {
		return "", "", fmt.Errorf("%q is not a schedule: use a cron expression (0 9 * * 1-5), every 30m, or at 2026-12-01 09:00", text)
	}
	when = strings.Join(words[:n], " ")
	rest = text
	for range n {
		_, rest = cutWord(rest)
	}
	return when, rest, nil
}

func firstOf(words []string) string {
	if len(words) == 0 {
		return ""
	}
	return words[0]
}
