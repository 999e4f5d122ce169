package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"nanohost/internal/channels"
	"nanohost/internal/ipc"
	"nanohost/internal/store"
)

// ipcHost is the host as the IPC watcher sees it (ipc.Host). The watcher
// has already decided which group asks and that it may.
type ipcHost struct{ h *Host }

// StartPipeline starts a run for an agent. The request id is an
// idempotency key: a request offered again after a crash returns the run it
// started the first time.
func (x ipcHost) StartPipeline(ctx context.Context, req ipc.StartRequest) (ipc.StartResult, error) {
	h := x.h
	if rec, ok, err := h.store.Processed(ctx, req.Group, req.RequestID); err == nil && ok && rec.Type == string(ipc.TypeStartPipeline) {
		var prev ipc.StartResult
		if json.Unmarshal(rec.Response, &prev) == nil && prev.RunID != "" {
			return prev, nil
		}
	}
	run, diags, err := h.runs.start(ctx, startSpec{
		Group: req.Group, Chat: req.Chat, Thread: req.Thread, User: "agent:" + req.Group, File: req.File,
		Source: req.DOT, Goal: req.Goal, Verbosity: string(req.Verbosity),
	})
	if err != nil {
		return ipc.StartResult{}, err
	}
	res := ipc.StartResult{RunID: run.ID, Chat: run.ChatID, Warnings: diags}
	if data, err := json.Marshal(ipc.StartResult{RunID: run.ID, Chat: run.ChatID}); err == nil {
		if _, err := h.store.MarkProcessed(ctx, req.Group, req.RequestID, string(ipc.TypeStartPipeline), data); err != nil {
			h.log.Warn("record ipc request", "group", req.Group, "request", req.RequestID, "err", err)
		}
	}
	return res, nil
}

// CancelPipeline stops a run.
func (x ipcHost) CancelPipeline(ctx context.Context, group, runID string) error {
	err := x.h.runs.cancel(ctx, runID)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("run %s: %w", runID, ipc.ErrUnknownRun)
	}
	return err
}

// PipelineStatus reports a run.
func (x ipcHost) PipelineStatus(ctx context.Context, group, runID string) (ipc.RunStatus, error) {
	return x.h.runs.status(ctx, runID)
}

// SendMessage posts an agent's message to a chat.
func (x ipcHost) SendMessage(ctx context.Context, group, chat, thread, text string) error {
	ch, err := x.h.channelFor(chat)
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
