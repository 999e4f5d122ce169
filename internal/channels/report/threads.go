package report

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"nanohost/internal/channels"
	"nanohost/internal/runs"
)

// Threads opens runs' chat threads on the channel that owns each run's
// chat (runs.Threads).
type Threads struct {
	// Channels are the host's transports; a run's chat belongs to one.
	Channels []channels.Channel
	// Life bounds every thread: a thread still waiting for a chat that is
	// down keeps trying until it ends (the host's delivery lifetime).
	Life context.Context
	// Backoff paces the retries of a chat that fails.
	Backoff Backoff
	// Verbosity is used for runs that do not say.
	Verbosity    runs.Verbosity
	CardInterval time.Duration
	// GateLinks, when set, gives the links shown under a run's gate
	// prompts (see Config.GateLinks); nil for none.
	GateLinks func(ctx context.Context, run runs.Run) []channels.Link
	// StartText, when set, gives the message posted when a run starts
	// (see Config.StartText); nil for none.
	StartText func(ctx context.Context, run runs.Run) string
	// EndLinks, when set, gives the links shown under the message that
	// a run ended (see Config.EndLinks); nil for none.
	EndLinks func(ctx context.Context, run runs.Run) []channels.Link
	// RunURL, when set, is a run's page on the dashboard ("" for none),
	// shown with its status card.
	RunURL func(runID string) string
	Logger *slog.Logger
}

var _ runs.Threads = (*Threads)(nil)

// Open implements runs.Threads.
func (t *Threads) Open(_ context.Context, run runs.Run, name string, progress func(runs.Progress), events runs.EventSource) (runs.Thread, error) {
	ch, err := t.channelFor(run.ChatID)
	if err != nil {
		return nil, err
	}
	log := t.Logger
	if log == nil {
		log = slog.Default()
	}
	verbosity := run.Verbosity
	if verbosity == "" {
		verbosity = t.Verbosity
	}
	var links func(context.Context) []channels.Link
	if t.GateLinks != nil {
		links = func(ctx context.Context) []channels.Link { return t.GateLinks(ctx, run) }
	}
	var startText func(context.Context) string
	if t.StartText != nil {
		startText = func(ctx context.Context) string { return t.StartText(ctx, run) }
	}
	var endLinks func(context.Context) []channels.Link
	if t.EndLinks != nil {
		endLinks = func(ctx context.Context) []channels.Link { return t.EndLinks(ctx, run) }
	}
	runURL := ""
	if t.RunURL != nil {
		runURL = t.RunURL(run.ID)
	}
	return Start(t.Life, Config{
		Channel: NewPatient(ch, t.Backoff, log.With("run", run.ID)), Chat: run.ChatID,
		RunID: run.ID, Pipeline: name, Goal: run.Goal, Verbosity: verbosity.OrDefault(), LogRef: run.LogsRoot, RunURL: runURL,
		Resume:     runs.Progress{RootID: run.ThreadTS, LastSeq: run.LastDeliveredSeq},
		Taken:      run.ThreadTS != "" || run.LastSeq > 0,
		OnProgress: progress, Events: events, GateLinks: links, StartText: startText, EndLinks: endLinks, CardInterval: t.CardInterval, Started: run.StartedAt,
		Logger: log.With("component", "report"),
	}), nil
}

func (t *Threads) channelFor(chat string) (channels.Channel, error) {
	for _, ch := range t.Channels {
		if ch.Owns(chat) {
			return ch, nil
		}
	}
	return nil, fmt.Errorf("no channel of this host serves chat %q (is Slack configured?)", chat)
}

// Serves implements runs.Threads.
func (t *Threads) Serves(chat string) error {
	_, err := t.channelFor(chat)
	return err
}
