package ipc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// verdict is what handling a request came to.
type verdict struct {
	resp Response
	// final answers are recorded, so the same request id gets the same
	// answer again without being acted on; transient failures are not, so
	// the agent may retry the same request later.
	final bool
	// quarantine, when set, moves the file to errors/ with this reason and
	// tells the group's chat (malformed and unauthorized requests).
	quarantine string
}

func accepted(req Request) verdict {
	m := req.Meta()
	return verdict{resp: Response{RequestID: m.RequestID, Type: m.Type, Status: Accepted}, final: true}
}

func rejected(req Request, reason string) verdict {
	m := req.Meta()
	return verdict{resp: Response{RequestID: m.RequestID, Type: m.Type, Status: Rejected, Reason: reason}, final: true}
}

func failed(req Request, reason string) verdict {
	m := req.Meta()
	return verdict{resp: Response{RequestID: m.RequestID, Type: m.Type, Status: Failed, Reason: reason, Retryable: true}}
}

// unauthorized answers the agent with agentReason and quarantines the file
// with the full reason (which may name chats the agent should not learn of).
func unauthorized(req Request, agentReason, fullReason string) verdict {
	v := rejected(req, "not allowed: "+agentReason)
	v.quarantine = "unauthorized: " + fullReason
	return v
}

// dispatch authorizes, rate-limits and performs one decoded request for group.
func (w *Watcher) dispatch(ctx context.Context, group string, req Request) verdict {
	switch r := req.(type) {
	case *StartPipeline:
		return w.startPipeline(ctx, group, r)
	case *CancelPipeline:
		return w.onRun(ctx, group, r, r.RunID, ActionCancelPipeline)
	case *PipelineStatus:
		return w.onRun(ctx, group, r, r.RunID, ActionPipelineStatus)
	case *SendMessage:
		return w.sendMessage(ctx, group, r)
	case *ScheduleTask, *TaskRef, *UpdateTask, *RegisterGroup:
		return w.dispatchTask(ctx, group, req)
	}
	return rejected(req, fmt.Sprintf("request type %q is not handled", req.Meta().Type))
}

func (w *Watcher) startPipeline(ctx context.Context, group string, r *StartPipeline) verdict {
	d, v, ok := w.admit(r, group, ActionStartPipeline, r.Chat, w.starts, "pipeline starts")
	if !ok {
		return v
	}
	src, file := []byte(r.DOT), r.File
	if r.Pipeline != "" {
		var err error
		if src, err = w.readPipelineFile(group, r.Pipeline); err != nil {
			return rejected(r, err.Error())
		}
		file = r.Pipeline
	}
	if file == "" {
		file = "request " + r.RequestID
	}
	res, err := w.cfg.Host.StartPipeline(ctx, StartRequest{
		Group: group, RequestID: r.RequestID, Chat: d.Chat, Thread: r.Thread,
		File: file, DOT: src, Goal: r.Goal, Verbosity: r.Verbosity, Inputs: r.Inputs,
	})
	if v, bad := hostError(r, err); bad {
		// A rejected start keeps its token: checking a graph is the costly
		// part (a file at the size limit takes the lint most of a second),
		// so an agent sending graphs that fail must not do it without
		// limit. Only a start the host could not do right now is given back.
		if v.resp.Status == Failed {
			w.starts.refund(group)
		}
		return v
	}
	v = accepted(r)
	v.resp.RunID, v.resp.Chat, v.resp.Thread = res.RunID, res.Chat, res.Thread
	if v.resp.Chat == "" {
		v.resp.Chat = d.Chat
	}
	v.resp.Diagnostics = res.Warnings
	return v
}

func (w *Watcher) readPipelineFile(group, rel string) ([]byte, error) {
	if w.cfg.Workspace == nil {
		return nil, errors.New(`this host does not read pipeline files: send the DOT source in "dot" (nanoagent ipc start-pipeline FILE.dot does that)`)
	}
	return readWorkspaceDOT(w.cfg.Workspace(group), rel, w.cfg.Limits.DOTBytes)
}

// onRun handles cancel_pipeline and pipeline_status: find the run's chat,
// authorize against it, then act.
func (w *Watcher) onRun(ctx context.Context, group string, req Request, runID string, action Action) verdict {
	st, err := w.cfg.Host.PipelineStatus(ctx, group, runID)
	if errors.Is(err, ErrUnknownRun) {
		return rejected(req, fmt.Sprintf("there is no pipeline run %q", runID))
	}
	if v, bad := hostError(req, err); bad {
		return v
	}
	d := Authorize(group, action, Target{Chat: st.Chat}, w.cfg.Registry)
	if !d.Allowed {
		return unauthorized(req, fmt.Sprintf("run %q is not in this group's chat", runID), d.Reason)
	}
	if action == ActionCancelPipeline {
		if v, bad := hostError(req, w.cfg.Host.CancelPipeline(ctx, group, runID)); bad {
			return v
		}
		if after, err := w.cfg.Host.PipelineStatus(ctx, group, runID); err == nil {
			st = after
		}
	}
	v := accepted(req)
	v.resp.RunID, v.resp.Chat, v.resp.Thread, v.resp.Run = st.RunID, st.Chat, st.Thread, &st
	return v
}

func (w *Watcher) sendMessage(ctx context.Context, group string, r *SendMessage) verdict {
	d, v, ok := w.admit(r, group, ActionSendMessage, r.Chat, w.messages, "messages")
	if !ok {
		return v
	}
	if v, bad := hostError(r, w.cfg.Host.SendMessage(ctx, group, d.Chat, r.Thread, r.Text)); bad {
		return v
	}
	v = accepted(r)
	v.resp.Chat, v.resp.Thread = d.Chat, r.Thread
	return v
}

// admit authorizes a request that names its target chat and takes a token
// from the group's bucket l. When it returns false, v is the answer.
func (w *Watcher) admit(req Request, group string, action Action, chat string, l *limiter, what string) (d Decision, v verdict, ok bool) {
	d = Authorize(group, action, Target{Chat: chat}, w.cfg.Registry)
	if !d.Allowed {
		return d, unauthorized(req, d.Reason, d.Reason), false
	}
	allowed, wait := l.allow(group)
	if !allowed {
		secs := int(math.Ceil(wait.Seconds()))
		v = failed(req, fmt.Sprintf("rate limit: too many %s from this group; try again in %ds", what, secs))
		v.resp.RetryAfterSeconds = secs
		return d, v, false
	}
	return d, verdict{}, true
}

// hostError turns a Host error into the answer: a *RejectError is a final
// rejection with its diagnostics (quarantined too when it is abusive, see
// RejectError.abuse), anything else a retryable failure.
func hostError(req Request, err error) (verdict, bool) {
	if err == nil {
		return verdict{}, false
	}
	var rej *RejectError
	if errors.As(err, &rej) {
		v := rejected(req, rej.Reason)
		v.resp.Diagnostics = rej.Diagnostics
		v.quarantine = rej.abuse()
		return v, true
	}
	return failed(req, "the host could not do this right now: "+err.Error()), true
}

// malformed is the verdict for a file that is not a valid request. The
// answer goes to the request id if the file names a usable one, else to the
// file's own name, which clients make the same.
func malformed(data []byte, stem string, err error) verdict {
	id := stem
	var env Envelope
	if json.Unmarshal(data, &env) == nil && ValidRequestID(env.RequestID) == nil {
		id = env.RequestID
	}
	reason := "malformed request: " + err.Error()
	return verdict{
		resp:       Response{RequestID: id, Type: env.Type, Status: Rejected, Reason: reason},
		quarantine: reason,
	}
}

// handleClaimed takes one claimed file from read to removal. It never
// panics: a panic while handling quarantines the file.
func (w *Watcher) handleClaimed(ctx context.Context, group string, root *os.Root, p pending, claimed string) {
	log := w.log.With("group", group, "file", string(p.queue)+"/"+p.name)
	stem := strings.TrimSuffix(p.name, ".json")
	defer func() {
		if r := recover(); r != nil {
			log.Error("ipc: panic while handling request", "panic", r)
			reason := fmt.Sprintf("internal error while handling this file: %v", r)
			w.finish(group, root, p, claimed, verdict{
				resp:       Response{RequestID: stem, Status: Rejected, Reason: reason},
				quarantine: reason,
			}, log)
		}
	}()
	data, err := readClaimed(claimed, w.cfg.Limits.FileBytes)
	if err != nil {
		w.finish(group, root, p, claimed, malformed(nil, stem, err), log)
		return
	}
	req, err := DecodeFile(p.queue, stem, data, w.cfg.Limits)
	if err != nil {
		w.finish(group, root, p, claimed, malformed(data, stem, err), log)
		return
	}
	// Once a request is read it is seen through even if the watcher is
	// stopping: the Host call and the bookkeeping after it belong together.
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.HandlerTimeout)
	defer cancel()
	id := req.Meta().RequestID
	prev, seen, err := w.cfg.Processed.Lookup(hctx, group, id)
	if err != nil {
		log.Error("ipc: cannot check whether a request was handled before", "request_id", id, "err", err)
		w.finish(group, root, p, claimed, failed(req, "the host cannot check this request right now; submit it again later"), log)
		return
	}
	if seen {
		log.Info("ipc: duplicate request answered with the original response", "request_id", id)
		w.finish(group, root, p, claimed, verdict{resp: prev}, log)
		return
	}
	tried := previousAttempts(w.attemptPath(group, p))
	if tried.Attempts >= poisonAttempts {
		log.Error("ipc: the host died while handling this request before; it is quarantined, not handled again",
			"request_id", id, "attempts", tried.Attempts, "last_attempt", tried.Last)
		v := poisoned(req, tried)
		w.record(hctx, group, id, &v, log)
		w.finish(group, root, p, claimed, v, log)
		return
	}
	att, stopWatching := w.beginAttempt(ctx, group, p, tried)
	defer stopWatching()
	if w.onHandle != nil {
		w.onHandle(group, req)
	}
	if w.cfg.OnDispatch != nil {
		if fi, err := os.Lstat(claimed); err == nil {
			w.cfg.OnDispatch(group, req.Meta().Type, max(w.cfg.Now().Sub(fi.ModTime()), 0))
		}
	}
	v := w.dispatch(hctx, group, req)
	w.record(hctx, group, id, &v, log)
	att.done()
	w.finish(group, root, p, claimed, v, log)
}

// record stamps a verdict and, when it is final, records the answer.
func (w *Watcher) record(ctx context.Context, group, id string, v *verdict, log *slog.Logger) {
	w.stamp(&v.resp)
	if v.final {
		if err := w.cfg.Processed.Record(ctx, group, id, v.resp); err != nil {
			log.Error("ipc: cannot record processed request", "request_id", id, "err", err)
		}
	}
}

// finish answers, then quarantines or removes the claimed file. The answer
// is written before the file is removed, so a crash in between re-handles
// the file, finds the recorded answer, and writes it again.
func (w *Watcher) finish(group string, root *os.Root, p pending, claimed string, v verdict, log *slog.Logger) {
	if v.resp.RequestID != "" {
		w.stamp(&v.resp)
		if err := writeResponse(root, v.resp); err != nil {
			log.Warn("ipc: cannot write response", "request_id", v.resp.RequestID, "err", err)
		}
		log.Info("ipc: request answered", "request_id", v.resp.RequestID, "type", v.resp.Type,
			"status", v.resp.Status, "reason", v.resp.Reason, "run_id", v.resp.RunID)
	}
	if w.onFinish != nil {
		defer w.onFinish(group, p.name)
	}
	w.clearAttempts(group, p) // before the file goes: see attempt.done
	if v.quarantine == "" {
		if err := os.RemoveAll(claimed); err != nil {
			log.Error("ipc: cannot remove handled request", "err", err)
		}
		return
	}
	dst, err := quarantine(claimed, w.errorsDir(group), p, v.quarantine, w.cfg.MaxQuarantined, w.cfg.Now())
	log.Warn("ipc: request rejected and quarantined", "reason", v.quarantine, "kept_at", dst, "err", err)
	w.noteRejected(group, string(p.queue)+"/"+p.name, v.resp.Reason, v.quarantine, dst, log)
}

// stamp sets the version and time of a new response (a recorded one keeps its time).
func (w *Watcher) stamp(r *Response) {
	r.V = Version
	if r.At.IsZero() {
		r.At = w.cfg.Now().UTC()
	}
}

// noteTimeout bounds posting one rejection note to chat.
const noteTimeout = 10 * time.Second

// noteRejected reports a quarantined file in the group's own chat, through
// Host.SendMessage like any message, and to OnRejected — at most a few times
// a minute per group. The chat is told the reason the agent got, which never
// names another group's chat; OnRejected gets the full reason.
func (w *Watcher) noteRejected(group, file, agentReason, fullReason, kept string, log *slog.Logger) {
	if ok, _ := w.notes.allow(group); !ok {
		return
	}
	if w.cfg.OnRejected != nil {
		safely(log, "OnRejected", func() { w.cfg.OnRejected(group, file, fullReason) })
	}
	g, ok := w.cfg.Registry.LookupGroup(group)
	if !ok || g.Chat == "" {
		return
	}
	safely(log, "posting the rejection note", func() {
		ctx, cancel := context.WithTimeout(context.Background(), noteTimeout)
		defer cancel()
		if err := w.cfg.Host.SendMessage(ctx, group, g.Chat, "", w.rejectionNote(file, agentReason, kept)); err != nil {
			log.Warn("ipc: cannot post the rejection note to chat", "chat", g.Chat, "err", err)
		}
	})
}

// safely runs fn, logging instead of propagating a panic: reporting a
// rejected file must not take the group's worker down.
func safely(log *slog.Logger, what string, fn func()) {
	defer func() {
		if r := recover(); r != nil {
			log.Error("ipc: "+what+" panicked", "panic", r)
		}
	}()
	fn()
}

// maxNoteReason bounds the reason quoted in a rejection note.
const maxNoteReason = 300

// rejectionNote is the chat text about a quarantined file.
func (w *Watcher) rejectionNote(file, reason, kept string) string {
	if r := []rune(reason); len(r) > maxNoteReason {
		reason = string(r[:maxNoteReason]) + "…"
	}
	note := fmt.Sprintf("An IPC request from this group's agent was rejected (%s): %s", file, reason)
	if rel, err := filepath.Rel(w.cfg.Root, kept); err == nil && kept != "" {
		note += fmt.Sprintf("\nThe file is kept for inspection in the host's IPC directory, %s.", filepath.ToSlash(rel))
	}
	return note
}
