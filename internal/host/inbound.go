package host

import (
	"context"
	"log/slog"
	"strings"

	"nanohost/internal/channels"
	"nanohost/internal/runlog"
	"nanohost/internal/runs"
)

// The chat side of gates: a button clicked, a key typed, a reply in a
// run's thread become runs.Answer calls; a refusal comes back as an error
// and is shown to the person who answered, in the thread they answered in.

// answerGate answers the gate a button or a typed key names.
func answerGate(ctx context.Context, service *runs.Service, ch channels.Channel, in channels.Inbound, log *slog.Logger) {
	if in.Gate == nil {
		return
	}
	if _, err := service.Answer(ctx, *in.Gate, in.Who()); err != nil {
		tell(ctx, ch, in, refusal(ctx, ch, err), log)
	}
}

// answerInThread treats a plain message in a run's thread as the free-text
// answer to the thread's open gate, if that gate takes text (the only case
// a plain message answers anything: it is never an approval). It reports
// whether the message was consumed.
func answerInThread(ctx context.Context, service *runs.Service, ch channels.Channel, in channels.Inbound, log *slog.Logger) bool {
	text := strings.TrimSpace(in.Text)
	if in.Thread == "" || text == "" {
		return false
	}
	g, ok, err := service.GateInThread(ctx, in.Chat, in.Thread)
	if err != nil {
		log.Warn("look up the thread's open gate", "chat", in.Chat, "thread", in.Thread, "err", err)
		return false
	}
	if !ok {
		return false
	}
	q := g.Question()
	if !q.AcceptsText() {
		if _, isChoice := q.Option(text); isChoice {
			tell(ctx, ch, in, runlog.UseTheButtons, log)
		}
		return false
	}
	answer := runs.GateAnswer{RunID: g.RunID, GateID: g.GateID, Nonce: g.Nonce, Text: text}
	if _, err := service.Answer(ctx, answer, in.Who()); err != nil {
		tell(ctx, ch, in, refusal(ctx, ch, err), log)
	}
	return true
}

// answerTyped takes a line typed where typed answers are on (the
// console) as an answer when it names a choice of a waiting gate: when only
// one waiting gate offers that choice, it is answered; when several do,
// the person is asked which run they mean (only those runs are listed,
// each with its pipeline and goal). Anything else is not an answer and
// goes on to the agent. It reports whether the line was consumed.
func answerTyped(ctx context.Context, service *runs.Service, describe describeRun, ch channels.Channel, in channels.Inbound, log *slog.Logger) bool {
	text := strings.TrimSpace(in.Text)
	if !ch.Capabilities().TypedAnswers || in.Thread != "" || text == "" {
		return false
	}
	open, err := service.OpenGates(ctx, in.Chat)
	if err != nil {
		log.Warn("look up the chat's open gates", "chat", in.Chat, "err", err)
		return false
	}
	var offering []runs.Gate
	for _, g := range open {
		if namesChoice(g.Question(), text) {
			offering = append(offering, g)
		}
	}
	switch {
	case len(offering) == 0:
		return false
	case len(offering) > 1:
		waiting := make([]runlog.Waiting, len(offering))
		for i, g := range offering {
			waiting[i] = runlog.Waiting{Gate: g}
			waiting[i].Pipeline, waiting[i].Goal = describe(ctx, g.RunID)
		}
		tell(ctx, ch, in, runlog.WhichRun(text, waiting), log)
		return true
	}
	g, q := offering[0], offering[0].Question()
	if q.KeyShared(text) {
		tell(ctx, ch, in, runlog.SharedKey(text), log)
		return true
	}
	answer := runs.GateAnswer{RunID: g.RunID, GateID: g.GateID, Nonce: g.Nonce, Choice: text}
	if _, err := service.Answer(ctx, answer, in.Who()); err != nil {
		tell(ctx, ch, in, refusal(ctx, ch, err), log)
	}
	return true
}

// describeRun is what a run is, for a person choosing among runs: its
// pipeline's name and its goal.
type describeRun func(ctx context.Context, runID string) (pipeline, goal string)

// refusal is what the person is told when their answer is refused.
func refusal(ctx context.Context, ch channels.Channel, err error) string {
	return runlog.AnswerRefusal(err, func(user string) string { return channels.UserName(ctx, ch, user) })
}

// tell shows text to the person behind in, in the thread they wrote in.
func tell(ctx context.Context, ch channels.Channel, in channels.Inbound, text string, log *slog.Logger) {
	if err := ch.Ephemeral(ctx, in.Chat, in.Thread, in.User, text); err != nil {
		log.Warn("reply to one person", "channel", ch.Name(), "user", in.User, "err", err)
	}
}
