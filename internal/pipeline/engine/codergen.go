package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/agenttext"
	"nanohost/internal/pipeline/fidelity"
	"nanohost/internal/pipeline/output"
)

// codergenHandler sends the node's prompt to the Backend and reads the
// outcome from what the agent produced (spec §4.5, host document).
type codergenHandler struct{}

func (codergenHandler) Execute(ctx context.Context, st *Stage) (Outcome, error) {
	prompt, err := stagePrompt(st)
	if err != nil {
		return refFailure(err)
	}
	if guidance, ok := st.w.r.takeGuidance(); ok {
		st.Emit(Event{Type: EventSteered, Label: st.Node.Label(), Message: guidance})
		prompt += "\n\n## Guidance from the manager supervising this run\n\n" + guidance
	}
	return runAgent(ctx, st, KindCodergen, prompt, "")
}

// stagePrompt is the node's prompt (its label when empty) with $goal and
// its ${…} references expanded.
func stagePrompt(st *Stage) (string, error) {
	prompt, what := st.Node.Attrs["prompt"], "prompt"
	if strings.TrimSpace(prompt) == "" {
		prompt, what = st.Node.Label(), "label"
	}
	return expandRefs(st, what, strings.ReplaceAll(prompt, "$goal", st.Graph.Goal()), nil)
}

// stageSchema is the node's compiled output_schema, nil when it has none.
func stageSchema(st *Stage) (*output.Schema, error) {
	text := strings.TrimSpace(st.Node.Attrs["output_schema"])
	if text == "" {
		return nil, nil
	}
	s, err := output.Compile(text)
	if err != nil {
		return nil, fmt.Errorf("%s's output_schema cannot be used: %v", st.Node.ID, err)
	}
	return s, nil
}

// agentReply is a backend answer with its outcome resolved.
type agentReply struct {
	res    Result
	clean  string // the text without outcome tags
	out    Outcome
	source string // where the outcome came from: backend, status_file, tags, default
	// noReason: a FAIL or RETRY came without a reason (out has a made-up one).
	noReason bool
}

// runAgent calls the backend for a codergen-like node (kind codergen with
// toolCommand "", or tool), writes prompt.md and response.md, and resolves
// the outcome: a structured outcome from the backend, else a status.json
// the agent wrote into the stage directory, else [outcome:…] tags, else
// SUCCESS with a warning.
func runAgent(ctx context.Context, st *Stage, kind RequestKind, prompt, toolCommand string) (Outcome, error) {
	st.reask = 0
	schema, err := stageSchema(st)
	if err != nil {
		return Outcome{Status: StatusFail, FailureReason: err.Error()}, nil
	}
	if st.w.r.cfg.Simulated {
		schema = nil // a simulation does no work and returns no output: conditions see none
	}
	if schema != nil {
		if kind == KindCodergen {
			prompt += outputInstructions(schema)
		}
		if !st.freshDir { // an output.json of an earlier visit is not this one's
			if err := clearStageFile(st, output.File); err != nil {
				return Outcome{}, err
			}
		}
	}
	reply, err := callBackend(ctx, st, kind, prompt, toolCommand)
	if err != nil {
		return Outcome{}, err
	}
	if schema != nil {
		if reply, err = typedOutput(ctx, st, kind, prompt, toolCommand, reply, schema); err != nil {
			return Outcome{}, err
		}
	}
	out := reply.out
	if reply.source == "default" {
		st.Warn(fmt.Sprintf("%s's response has no [outcome:…] tag and no status.json; treating it as success", st.Node.ID))
	}
	out.ContextUpdates = withUpdates(out.ContextUpdates, map[string]any{
		KeyLastStage:    st.Node.ID,
		KeyLastResponse: truncate(reply.clean, maxContextResponse),
	})
	return out, nil
}

// callBackend does the shared part of every agent call.
func callBackend(ctx context.Context, st *Stage, kind RequestKind, prompt, toolCommand string) (agentReply, error) {
	r := st.w.r
	if r.cfg.Backend == nil {
		return agentReply{}, errors.New("no backend configured for agent stages")
	}
	if kind == KindCodergen {
		prompt = identityPrompt(st, prompt)
	}
	// Without a stage directory (a simulated backend) the stage keeps no files.
	files := st.dirReady
	if files {
		if err := writeStageFile(filepath.Join(st.StageDir, "prompt.md"), []byte(prompt)); err != nil {
			return agentReply{}, fmt.Errorf("write prompt.md: %w", err)
		}
	}
	// A status.json left by an earlier visit must not be taken for this one's.
	statusPath := filepath.Join(st.StageDir, "status.json")
	if files && !st.freshDir {
		if err := os.Remove(statusPath); err != nil && !errors.Is(err, os.ErrNotExist) {
			return agentReply{}, fmt.Errorf("clear stale status.json: %w", err)
		}
	}
	req := r.request(st, kind, prompt, toolCommand)
	res, err := r.cfg.Backend.Run(ctx, req)
	st.AddUsage(res.Usage)
	if res.Changes != nil {
		st.changes = res.Changes // the latest attempt's, which covers the visit
	}
	if err != nil {
		return agentReply{}, fmt.Errorf("%s backend for %s: %w", kind, st.Node.ID, err)
	}
	// A tool's report may come as output only; its tags count the same.
	text := res.Text
	if kind == KindTool && text == "" {
		text = res.Output
	}
	parsed := agenttext.Parse(text)
	for _, w := range parsed.Warnings {
		st.Warn(st.Node.ID + ": " + w)
	}
	reply := agentReply{res: res, clean: parsed.Clean}
	st.response = parsed.Clean
	if files {
		if err := writeStageFile(filepath.Join(st.StageDir, "response.md"), []byte(parsed.Clean)); err != nil {
			return agentReply{}, fmt.Errorf("write response.md: %w", err)
		}
	}
	emitHooks(st, res.Hooks)
	if parsed.Clean != "" {
		st.Emit(Event{Type: EventAgentResponse, Label: st.Node.Label(), Message: truncate(parsed.Clean, maxEventText)})
	}
	if !files {
		statusPath = ""
	}
	reply.out, reply.source = resolveOutcome(res, parsed, statusPath)
	if reply.out.FailureReason == "" && (reply.out.Status == StatusFail || reply.out.Status == StatusRetry) {
		reply.out.FailureReason, reply.noReason = reportedReason(reply.out.Status, parsed.Clean), true
	}
	return reply, nil
}

// reportedReason explains a FAIL or RETRY the agent gave without a reason:
// its status and the first line of what it said.
func reportedReason(s Status, text string) string {
	reason := "the agent reported " + string(s)
	if line := firstLine(text); line != "" {
		reason += ": " + truncate(line, 200)
	}
	return reason
}

// resolveOutcome applies the precedence backend outcome > status.json > tags.
// source is "default" when none of them said anything.
func resolveOutcome(res Result, parsed agenttext.Parsed, statusPath string) (Outcome, string) {
	if res.Outcome != nil {
		return *res.Outcome, "backend"
	}
	if statusPath != "" { // "": no stage directory to look in
		data, err := readStageFile(statusPath, maxStatusFile)
		switch {
		case err == nil:
			return statusFileOutcome(data), "status_file"
		case !errors.Is(err, fs.ErrNotExist):
			return Outcome{Status: StatusFail, FailureReason: "the agent's status.json cannot be used: " + err.Error()}, "status_file"
		}
	}
	// The other tags count with or without an [outcome:…] tag: a missing
	// outcome defaults the status, it does not drop what the agent set.
	out := Outcome{Status: StatusSuccess, PreferredLabel: parsed.PreferredLabel, SuggestedNextIDs: parsed.Next,
		ContextUpdates: tagContext(parsed.Context)}
	if parsed.Status == "" {
		return out, "default"
	}
	s, err := ParseStatus(parsed.Status)
	if err != nil {
		return Outcome{Status: StatusFail, FailureReason: "the agent reported an unknown [outcome:…] tag: " + err.Error()}, "tags"
	}
	out.Status = s
	return out, "tags"
}

// tagContext is the [context:k=v] pairs as context updates (nil when none).
func tagContext(pairs map[string]string) map[string]any {
	if len(pairs) == 0 {
		return nil
	}
	updates := make(map[string]any, len(pairs))
	for k, v := range pairs {
		updates[k] = v
	}
	return updates
}

// statusFileOutcome reads a status.json the agent wrote (Appendix C).
func statusFileOutcome(data []byte) Outcome {
	sf, err := agenttext.ParseStatusFile(data)
	if err != nil {
		return Outcome{Status: StatusFail, FailureReason: "the agent wrote an invalid status.json: " + err.Error()}
	}
	s, err := ParseStatus(sf.Outcome)
	if err != nil {
		return Outcome{Status: StatusFail, FailureReason: "status.json: " + err.Error()}
	}
	return Outcome{Status: s, PreferredLabel: sf.PreferredLabel, SuggestedNextIDs: sf.SuggestedNextIDs,
		ContextUpdates: sf.ContextUpdates, Notes: sf.Notes, FailureReason: sf.FailureReason}
}

// request builds the backend request, resolving fidelity and thread (§5.4).
func (r *run) request(st *Stage, kind RequestKind, prompt, toolCommand string) Request {
	n := st.Node
	mode := fidelity.Resolve(r.g, st.Incoming, n)
	if r.takeDegrade() && mode == fidelity.Full {
		// The session of a full-fidelity thread did not survive the restart.
		mode = fidelity.SummaryHigh
		st.Warn(fmt.Sprintf("%s resumes a full-fidelity thread whose session was lost; using summary:high for this stage", n.ID))
	}
	req := Request{
		Kind: kind, RunID: r.runID, NodeID: n.ID, Node: n, Attempt: st.Attempt, Visit: st.Visit, Execution: st.Execution, Reask: st.reask,
		Prompt: prompt, Fidelity: string(mode), Isolated: isTrue(n.Attrs["isolated"]), Branch: st.w.path,
		Persona: personaName(n, identity{persona: st.Persona}), Masks: maskNames(n, identity{masks: st.Masks}),
		Model: n.Attrs.String("llm_model", n.Attrs["model"]), Provider: n.Attrs.String("llm_provider", n.Attrs["provider"]),
		ReasoningEffort: n.Attrs["reasoning_effort"], ToolCommand: toolCommand, StageDir: st.StageDir, RunDir: r.root,
		Workdir:   r.cfg.Workdir,
		ToolHooks: ToolHooks{Pre: nodeOrGraph(n, r.g, "tool_hooks.pre"), Post: nodeOrGraph(n, r.g, "tool_hooks.post")},
	}
	req.Budget = r.budget(n)
	if d, err := n.Attrs.Duration("timeout", 0); err == nil {
		req.Timeout = d
	} else {
		st.Warn(err.Error() + "; running without a timeout")
	}
	simulated := r.cfg.Simulated
	switch {
	case mode == fidelity.Full:
		req.ThreadKey = fidelity.ThreadKey(r.g, st.Incoming, n, st.PrevNode)
	case simulated:
		// No agent reads it: the simulation's no-work path skips the preamble.
	default:
		req.Preamble = fidelity.Preamble(mode, fidelity.History{
			RunID: r.runID, Goal: r.g.Goal(), Stages: r.historySnapshot(), Context: st.Context.Snapshot(), Artifacts: r.artifacts(),
		})
	}
	return req
}

// takeDegrade reports (once) whether this is the first agent stage after a resume.
func (r *run) takeDegrade() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := r.degrade
	r.degrade = false
	return d
}

// historySnapshot is the run's history as it is now, without copying it:
// the history only ever grows at its end (appendBounded), and the capped
// capacity keeps a later append from writing where this slice can see.
func (r *run) historySnapshot() []fidelity.Stage {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.history[:len(r.history):len(r.history)]
}

// withUpdates returns base plus extra (extra wins), without changing base.
func withUpdates(base, extra map[string]any) map[string]any {
	out := make(map[string]any, len(base)+len(extra))
	maps.Copy(out, base)
	maps.Copy(out, extra)
	return out
}

// firstLine is s's first line, with " …" when more follows.
func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

// nodeOrGraph is the node's attribute key, else the graph's.
func nodeOrGraph(n *pipeline.Node, g *pipeline.Graph, key string) string {
	if v := strings.TrimSpace(n.Attrs[key]); v != "" {
		return v
	}
	return strings.TrimSpace(g.Attrs[key])
}

// maxHookEvents bounds the ToolHook events one agent call records.
const maxHookEvents = 200

// emitHooks records the tool hooks that ran as ToolHook events (bounded).
func emitHooks(st *Stage, hooks []HookRun) {
	for i, h := range hooks {
		if i == maxHookEvents {
			st.Warn(fmt.Sprintf("%s: %d more tool hook runs not recorded", st.Node.ID, len(hooks)-i))
			break
		}
		st.Emit(Event{Type: EventToolHook, Label: st.Node.Label(), Message: truncate(h.Output, maxHookOutput),
			Data: map[string]any{"phase": h.Phase, "tool": h.Tool, "exit_code": h.ExitCode, "blocked": h.Blocked}})
	}
}

// maxHookOutput bounds a ToolHook event's output.
const maxHookOutput = 2048
