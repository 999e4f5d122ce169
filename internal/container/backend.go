package container

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"nanohost/internal/container/protocol"
	"nanohost/internal/mounts"
	"nanohost/internal/pipeline/agenttext"
	"nanohost/internal/pipeline/engine"
)

// Backend is the engine.Backend that runs every node in an agent container.
//
// Context fidelity maps to sessions (host-orchestration.md): a `full` node
// reuses the live container of its thread (Request.ThreadKey) and sends the
// prompt as a follow-up; when none is alive it starts one that resumes the
// thread's recorded agent session. Every other mode, and Isolated, gets a
// fresh one-shot container whose first prompt is Preamble + Prompt. Tool
// nodes run `sh -c tool_command` in a fresh container.
type Backend struct {
	cfg      Config
	log      *slog.Logger
	slots    *slots
	owner    string   // this process, for orphan detection
	redact   redactor // blanks the secrets out of what containers return
	dispatch atomic.Int64

	mu      sync.Mutex
	threads map[threadKey]*thread
	runs    map[string]RunEnv
	execs   map[execKey]int
	closed  bool
	bg      map[string]*sync.WaitGroup // per run: containers being cleaned up in the background

	sessionsMu sync.Mutex // serialises the threads' session files (thread_sessions.go)

	reclaimMu  sync.Mutex // serialises choosing what to reclaim (reclaim.go)
	reclaiming int        // idle sessions being stopped for waiting requests (reclaimMu)
}

// RunEnv is where a run's agents work.
type RunEnv struct {
	Group     string
	Workspace string
	// GroupIPC is the group's IPC directory on the host: its request queues
	// (the agents' start_pipeline, send_message…) are mounted under the
	// container's own IPC directory, where `nanoagent ipc` looks. "" for none.
	GroupIPC string
	// Skills is a directory mounted read-only at /workspace/skills. "" for none.
	Skills string
	// ExtraMounts are validated mounts (mounts.Policy.Validate) for this run.
	ExtraMounts []mounts.Mount
	// ForkSession is the agent session the run continues: a full-fidelity
	// thread with no session of its own yet starts as a fork of it (the
	// group's agent's chat, for a pipeline that agent started), not as a new
	// conversation; the fork's id is recorded as the thread's session. ""
	// for none.
	ForkSession string
}

// SkillsDir is where RunEnv.Skills appears inside a container.
const SkillsDir = "/workspace/skills"

// groupQueues are the subdirectories of a group's IPC directory its agents
// see (ipc.QueueTasks, ipc.QueueMessages, ipc.DirResponses).
var groupQueues = []string{"tasks", "messages", "responses"}

// bindMounts are the mounts every container of env gets besides its own
// IPC directory: the workspace, the group's queues, the skills, the extras.
func (env RunEnv) bindMounts() []mounts.Mount {
	ms := []mounts.Mount{{Source: env.Workspace, Target: protocol.WorkspaceDir}}
	if env.GroupIPC != "" {
		for _, q := range groupQueues {
			ms = append(ms, mounts.Mount{Source: filepath.Join(env.GroupIPC, q), Target: protocol.IPCDir + "/" + q})
		}
	}
	if env.Skills != "" {
		ms = append(ms, mounts.Mount{Source: env.Skills, Target: SkillsDir, ReadOnly: true})
	}
	return append(ms, env.ExtraMounts...)
}

type threadKey struct{ run, thread string }

type execKey struct{ run, node string }

// thread is a full-fidelity conversation: at most one live container, and
// the agent session id that a new container resumes.
type thread struct {
	key       threadKey
	mu        sync.Mutex // held for a whole dispatch
	live      *session
	wearing   string // the masks live was started with (masks.go)
	sessionID string
	loaded    bool // sessionID was looked up in the state directory
	idle      *time.Timer
}

// NewBackend checks the configuration and returns a backend. Call
// CleanupOrphans once at startup and Close at shutdown.
func NewBackend(cfg Config) (*Backend, error) {
	if err := cfg.applyDefaults(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	b := &Backend{
		cfg: cfg, log: cfg.Logger.With("component", "container"), slots: newSlots(cfg.MaxContainers),
		owner: currentOwner(), redact: newRedactor(cfg.Secrets), threads: map[threadKey]*thread{}, runs: map[string]RunEnv{}, execs: map[execKey]int{},
		bg: map[string]*sync.WaitGroup{},
	}
	b.slots.onWait = b.reclaimIdle
	return b, nil
}

// bind sets where a run's (or a conversation's) agents work (default:
// Config.Workspace/Group).
func (b *Backend) bind(runID string, env RunEnv) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.runs[runID] = env
}

func (b *Backend) runEnv(runID string) (RunEnv, error) {
	b.mu.Lock()
	env, ok := b.runs[runID]
	if !ok {
		env, ok = b.parentEnv(runID)
	}
	b.mu.Unlock()
	if !ok {
		env = RunEnv{Group: b.cfg.Group, Workspace: b.cfg.Workspace, ExtraMounts: b.cfg.ExtraMounts}
	}
	if env.Group == "" {
		env.Group = b.cfg.Group
	}
	if env.Workspace == "" {
		return env, errors.New("no workspace configured for the agents (Config.Workspace, or a run bound with ForRun)")
	}
	abs, err := mounts.Resolve(env.Workspace)
	if err != nil {
		return env, fmt.Errorf("workspace: %w", err)
	}
	env.Workspace = abs
	if state, err := mounts.Resolve(b.cfg.StateDir); err == nil && mounts.Within(state, abs) {
		return env, fmt.Errorf("the state directory %s is inside the workspace %s, where agents could tamper with other containers' IPC: move it out", state, abs)
	}
	return env, nil
}

// forkSource is the agent session a run's new full-fidelity threads fork
// (RunEnv.ForkSession; a child pipeline's is its parent run's), or "".
func (b *Backend) forkSource(runID string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	env, ok := b.runs[runID]
	if !ok {
		env, _ = b.parentEnv(runID)
	}
	return env.ForkSession
}

// parentEnv is the env of the run whose child pipeline runID is (b.mu held).
func (b *Backend) parentEnv(runID string) (RunEnv, bool) {
	for run, env := range b.runs {
		if ownRun(run, runID) {
			return env, true
		}
	}
	return RunEnv{}, false
}

// Run implements engine.Backend.
func (b *Backend) Run(ctx context.Context, req engine.Request) (engine.Result, error) {
	if b.isClosed() {
		return engine.Result{}, errors.New("container backend is closed")
	}
	nodeCtx, cancel := withNodeTimeout(ctx, req.Timeout)
	defer cancel()
	var res engine.Result
	var err error
	if req.Kind == engine.KindTool {
		res, err = b.runTool(nodeCtx, req)
	} else {
		res, err = b.runAgent(nodeCtx, req)
	}
	if err != nil && ctx.Err() == nil && errors.Is(nodeCtx.Err(), context.DeadlineExceeded) {
		return res, fmt.Errorf("node %s timed out after %s; its container was killed", req.NodeID, req.Timeout)
	}
	return res, err
}

func withNodeTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d > 0 {
		return context.WithTimeout(ctx, d)
	}
	return context.WithCancel(ctx)
}

// runAgent sends a codergen prompt to an agent container.
func (b *Backend) runAgent(ctx context.Context, req engine.Request) (engine.Result, error) {
	preq := protocol.Request{
		Version: protocol.Version, DispatchID: b.dispatch.Add(1), NodeID: req.NodeID,
		Execution: b.nextExecution(req.RunID, req.NodeID, req.Execution),
		Model:     req.Model, Provider: req.Provider, ReasoningEffort: req.ReasoningEffort,
		Workdir: req.Workdir,
	}
	if h := req.ToolHooks; h.Pre != "" || h.Post != "" {
		preq.ToolHooks = &protocol.ToolHooks{Pre: h.Pre, Post: h.Post}
	}
	if req.Fidelity == "full" && !req.Isolated {
		res, err := b.runInThread(ctx, req, preq)
		b.offerIdle() // its thread is unlocked: a waiting request may take its slot
		return res, err
	}
	preq.Prompt, preq.Once = joinPrompt(req.Preamble, req.Prompt), true
	s, err := b.startAgent(ctx, req, preq, "")
	if err != nil {
		return engine.Result{}, err
	}
	res, err := s.await(ctx, preq.DispatchID)
	if err != nil {
		s.stop("dispatch failed")
		return s.spent(), b.dispatchError(req, err)
	}
	out, err := b.toResult(req, s, res)
	// The container exits by itself after a one-shot answer; clean up
	// without making the pipeline wait for Docker (the run's Close waits).
	b.background(req.RunID, s.finish)
	return out, err
}

// runInThread sends a full-fidelity prompt to the thread's live container,
// starting one (resuming the thread's agent session) when none is alive.
func (b *Backend) runInThread(ctx context.Context, req engine.Request, preq protocol.Request) (engine.Result, error) {
	key := threadKey{req.RunID, req.ThreadKey}
	if key.thread == "" {
		key.thread = req.NodeID
	}
	t := b.thread(key)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.idle != nil {
		t.idle.Stop()
	}
	if t.sessionID == "" && !t.loaded {
		t.sessionID = b.recordedSession(key) // recorded by an earlier process, or before the run closed
	}
	t.loaded = true
	preq.SessionID = t.sessionID
	if preq.SessionID == "" {
		if from := b.forkSource(req.RunID); from != "" {
			preq.SessionID, preq.ForkSession = from, true
		}
	}
	if t.live != nil && !t.live.alive() {
		t.live.stop("died while idle")
		t.live = nil
	}
	if t.live != nil && t.wearing != b.cfg.wearing(req) {
		// Another node's masks (or none): their folders must not reach this
		// one. The agent session goes on in a new container.
		t.live.close(true, "the next node wears other masks")
		t.live = nil
	}
	if t.live != nil {
		preq.Prompt = joinPrompt(req.Preamble, req.Prompt)
		if err := t.live.send(preq); err != nil {
			t.live.stop("follow-up failed")
			t.live = nil
			return engine.Result{}, engine.Transient(fmt.Errorf("send follow-up to node %s's container: %w", req.NodeID, err))
		}
		b.emit(Event{Kind: EventReused, Container: t.live.h.Name, RunID: req.RunID, NodeID: req.NodeID, Thread: key.thread})
	} else {
		preq.Prompt = joinPrompt(req.Preamble, req.Prompt)
		s, err := b.startAgent(ctx, req, preq, key.thread)
		if err != nil {
			return engine.Result{}, err
		}
		t.live, t.wearing = s, b.cfg.wearing(req)
	}
	s := t.live
	res, err := s.await(ctx, preq.DispatchID)
	if err != nil {
		s.stop("dispatch failed")
		t.live = nil
		return s.spent(), b.dispatchError(req, err)
	}
	if res.SessionID != "" && res.SessionID != t.sessionID {
		t.sessionID = res.SessionID
		b.recordSession(key, res.SessionID)
	}
	s.lastUsed = time.Now()
	t.idle = time.AfterFunc(b.cfg.IdleTimeout, func() { b.closeIdle(t, s) })
	return b.toResult(req, s, res)
}

func (b *Backend) thread(key threadKey) *thread {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.threads[key]
	if !ok {
		t = &thread{key: key}
		b.threads[key] = t
	}
	return t
}

// closeIdle closes a thread's container nobody used for IdleTimeout. If the
// thread is busy or has moved on to another container, there is nothing to do.
func (b *Backend) closeIdle(t *thread, s *session) {
	if !t.mu.TryLock() {
		return
	}
	defer t.mu.Unlock()
	if t.live != s {
		return
	}
	t.live = nil
	s.close(true, "idle")
}

// nextExecution numbers a node's dispatch in its run: the engine's count
// when it gives one (it survives a resume in a new process), else our own.
func (b *Backend) nextExecution(runID, nodeID string, given int) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := execKey{runID, nodeID}
	if given > 0 {
		b.execs[k] = given
	} else {
		b.execs[k]++
	}
	return b.execs[k]
}

// dispatchError classifies a failed wait for a result.
func (b *Backend) dispatchError(req engine.Request, err error) error {
	err = fmt.Errorf("node %s: %w", req.NodeID, err)
	var gone *goneError
	if errors.As(err, &gone) && gone.retryable() {
		return engine.Transient(err)
	}
	return err
}

// toResult turns the agent's result into the engine's, failing fast on an
// error status and picking up a status file the agent wrote.
func (b *Backend) toResult(req engine.Request, s *session, res protocol.Result) (engine.Result, error) {
	out := engine.Result{
		Text: b.redact.String(res.Result), SessionID: res.SessionID,
		Usage: engine.Usage{InputTokens: res.Usage.InputTokens, OutputTokens: res.Usage.OutputTokens, CostUSD: res.Usage.CostUSD},
	}
	if res.Truncated {
		b.log.Warn("agent result was truncated by the runner", "node", req.NodeID)
	}
	for i, h := range res.Hooks {
		if i == protocol.MaxHookRuns {
			break
		}
		out.Hooks = append(out.Hooks, engine.HookRun{Phase: h.Phase, Tool: h.Tool, ExitCode: h.ExitCode, Blocked: h.Blocked,
			Output: b.redact.String(clipHook(h.Output))})
	}
	if s.meter != nil {
		// The gateway's numbers, not what the agent says it spent.
		var refusal string
		out.Usage, refusal = s.meter.take()
		if refusal != "" {
			return out, fmt.Errorf("node %s: the model gateway refused a call: %s", req.NodeID, refusal)
		}
	}
	if res.Status != protocol.StatusSuccess {
		err := fmt.Errorf("agent failed on node %s: %s", req.NodeID, b.redact.String(nonEmpty(res.Error, "status "+res.Status)))
		if res.Transient {
			return out, engine.Transient(err)
		}
		return out, err
	}
	outcome, err := b.statusFile(req, s.link, res)
	if err != nil {
		return out, err
	}
	out.Outcome = outcome
	return out, nil
}

// statusFile validates a status file the agent wrote for this dispatch,
// stores it as the stage's status.json and returns it as the outcome.
func (b *Backend) statusFile(req engine.Request, link agentLink, res protocol.Result) (*engine.Outcome, error) {
	data, ok, err := link.outcome(res)
	if err != nil || !ok {
		return nil, err
	}
	data = b.redact.Bytes(data)
	sf, err := agenttext.ParseStatusFile(data)
	if err != nil {
		return nil, fmt.Errorf("node %s: the agent wrote an invalid status file: %w", req.NodeID, err)
	}
	st, err := engine.ParseStatus(sf.Outcome)
	if err != nil {
		return nil, fmt.Errorf("node %s: status file: %w", req.NodeID, err)
	}
	o := &engine.Outcome{Status: st, PreferredLabel: sf.PreferredLabel, SuggestedNextIDs: sf.SuggestedNextIDs,
		ContextUpdates: sf.ContextUpdates, Notes: sf.Notes, FailureReason: sf.FailureReason}
	if req.StageDir != "" {
		data, err := o.MarshalStatusFile()
		if err == nil {
			err = writeFileAtomic(filepath.Join(req.StageDir, "status.json"), append(data, '\n'), 0o644)
		}
		if err != nil {
			return nil, fmt.Errorf("node %s: store status.json: %w", req.NodeID, err)
		}
	}
	return o, nil
}

// background runs cleanup work that closeRun and Close wait for.
func (b *Backend) background(runID string, f func()) {
	b.mu.Lock()
	wg, ok := b.bg[runID]
	if !ok {
		wg = &sync.WaitGroup{}
		b.bg[runID] = wg
	}
	wg.Add(1)
	b.mu.Unlock()
	go func() {
		defer wg.Done()
		f()
	}()
}

// closeRun ends a run's live sessions and removes its finished containers
// before it returns.
func (b *Backend) closeRun(runID string) {
	b.mu.Lock()
	var ts []*thread
	for k, t := range b.threads {
		if ownRun(runID, k.run) {
			ts = append(ts, t)
			delete(b.threads, k)
		}
	}
	for k := range b.execs {
		if ownRun(runID, k.run) {
			delete(b.execs, k)
		}
	}
	delete(b.runs, runID)
	var wgs []*sync.WaitGroup
	for run, wg := range b.bg {
		if ownRun(runID, run) {
			wgs = append(wgs, wg)
			delete(b.bg, run)
		}
	}
	b.mu.Unlock()
	closeThreads(ts)
	for _, wg := range wgs {
		wg.Wait()
	}
}

// Close ends every live session and waits for background cleanup.
func (b *Backend) Close() error {
	b.mu.Lock()
	b.closed = true
	ts := make([]*thread, 0, len(b.threads))
	for _, t := range b.threads {
		ts = append(ts, t)
	}
	b.threads = map[threadKey]*thread{}
	bg := b.bg
	b.bg = map[string]*sync.WaitGroup{}
	b.mu.Unlock()
	closeThreads(ts)
	for _, wg := range bg {
		wg.Wait()
	}
	return nil
}

func closeThreads(ts []*thread) {
	var wg sync.WaitGroup
	for _, t := range ts {
		wg.Go(func() {
			t.mu.Lock()
			defer t.mu.Unlock()
			if t.idle != nil {
				t.idle.Stop()
			}
			if t.live != nil {
				t.live.close(true, "run ended")
				t.live = nil
			}
		})
	}
	wg.Wait()
}

func (b *Backend) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

func joinPrompt(preamble, prompt string) string {
	if strings.TrimSpace(preamble) == "" {
		return prompt
	}
	return strings.TrimRight(preamble, "\n") + "\n\n" + prompt
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

var _ engine.Backend = (*Backend)(nil)

// clipHook bounds a hook's output as the runner should have.
func clipHook(s string) string {
	if len(s) <= protocol.MaxHookOutput {
		return s
	}
	return s[:protocol.MaxHookOutput] + "…"
}
