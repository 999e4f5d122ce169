package host

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runlog"
	"nanohost/internal/runs"
)

// tellBack is what telling an agent its pipeline's outcome takes.
type tellBack struct {
	chats     *chatRouter
	groups    *groupIndex
	endpoints *endpoints
	life      context.Context // the host's delivery life
	log       *slog.Logger
}

// tellAgent gives a group's agent the outcome of a pipeline it started over
// IPC when the run ends (succeeded, failed or cancelled; an interruption is
// not an end): a prompt in the group's conversation, keyed by the run, so
// it is stored and answered once however many times the end is observed
// (a replica taking the run over, a restart). Runs started by people, by
// schedules or webhooks, and a pipeline's child runs are not told back.
func (tb tellBack) tellAgent(run runs.Run, e engine.Event) {
	if !e.Ends() || e.Type == engine.EventPipelineInterrupted || run.Parent != "" ||
		run.StartedBy != agent(run.GroupFolder).User || run.ChatID == "" || tb.chats == nil {
		return
	}
	g, ok := tb.groups.byChatID(run.ChatID)
	if !ok {
		return
	}
	ch, err := tb.endpoints.channelFor(run.ChatID)
	if err != nil {
		tb.log.Warn("tell the agent its pipeline's outcome", "run", run.ID, "err", err)
		return
	}
	state := map[engine.EventType]string{engine.EventPipelineCompleted: "succeeded", engine.EventPipelineFailed: "failed",
		engine.EventPipelineCancelled: "cancelled"}[e.Type]
	name := run.FileName
	if e.Label != "" {
		name = e.Label
	}
	text := runlog.PipelineOutcomePrompt(run.ID, name, state, strings.TrimSpace(e.Message), nil)
	// Not on the engine's goroutine: the store write and the queue may wait.
	go func() {
		ctx, cancel := context.WithTimeout(tb.life, time.Minute)
		defer cancel()
		if _, err := tb.chats.prompt(ctx, g, ch, run.ChatID, "run-end:"+run.ID, "pipeline:"+run.ID, text); err != nil {
			tb.log.Warn("tell the agent its pipeline's outcome", "run", run.ID, "err", err)
		}
	}()
}
