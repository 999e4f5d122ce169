package runlog

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/team"
	"nanohost/internal/runs"
)

// routingRules are the decisions worth showing at standard verbosity: the
// ones where something other than the graph's only path chose.
var routingRules = map[string]bool{
	"condition": true, "preferred_label": true, "suggested_next_ids": true, "fallback_any_edge": true,
	"fail_condition": true, "fail_to_conditional": true, "retry_target": true, "fallback_retry_target": true,
	"graph_retry_target": true, "graph_fallback_retry_target": true, "goal_gate_retry": true, "shortcut": true,
}

// Level is the least verbosity at which e is shown.
func Level(e engine.Event) runs.Verbosity {
	switch e.Type {
	case engine.EventPipelineStarted, engine.EventPipelineCompleted, engine.EventPipelineFailed,
		engine.EventPipelineCancelled, engine.EventPipelineInterrupted, engine.EventPipelineResumed,
		engine.EventPullRequestOpened:
		return runs.VerbosityMinimal
	case engine.EventStageFailed:
		if e.WillRetry {
			return runs.VerbosityStandard
		}
		return runs.VerbosityMinimal
	case engine.EventStageStarted, engine.EventStageCompleted:
		if handler(e) == engine.TypeConditional {
			return runs.VerbosityVerbose
		}
		return runs.VerbosityStandard
	case engine.EventStageRetrying, engine.EventParallelStarted, engine.EventParallelBranchCompleted, engine.EventParallelCompleted, engine.EventStageOutput,
		engine.EventChildStarted, engine.EventSteered,
		engine.EventInterviewStarted, engine.EventInterviewCompleted, engine.EventInterviewTimeout, engine.EventWarning:
		return runs.VerbosityStandard
	case engine.EventToolHook:
		if blocked, _ := e.Data["blocked"].(bool); blocked {
			return runs.VerbosityStandard // a tool call the hook refused
		}
	case engine.EventDecision:
		if e.Decision != nil && routingRules[e.Decision.Rule] {
			return runs.VerbosityStandard
		}
	}
	return runs.VerbosityVerbose
}

// Shows reports whether e is shown at verbosity v.
func Shows(e engine.Event, v runs.Verbosity) bool { return v.AtLeast(Level(e)) }

// Line renders e as a line of the live log in the host document's format
// ("  → Implement (3/5)", "  ✓ Implement — 2m 30s", …); "" when the event
// has nothing to show.
func Line(e engine.Event) string {
	name := StageName(e.Label, e.NodeID, "")
	branch := ""
	if e.Branch != "" {
		branch = " [branch " + e.Branch + "]"
	}
	switch e.Type {
	case engine.EventPipelineStarted:
		if e.Message != "" {
			return fmt.Sprintf("[Pipeline] %s: %s", name, e.Message)
		}
		return "[Pipeline] " + name
	case engine.EventPipelineResumed:
		return fmt.Sprintf("[Pipeline] %s resumed at %s", name, e.NodeID)
	case engine.EventPipelineCompleted:
		return "✓ Pipeline complete — " + Duration(e.Duration)
	case engine.EventPipelineFailed:
		return fmt.Sprintf("✗ Pipeline failed — %s — %s", Duration(e.Duration), e.Message)
	case engine.EventPipelineCancelled:
		return "⊘ Pipeline cancelled" + byWhom(e.By) + " — " + Duration(e.Duration)
	case engine.EventPipelineInterrupted:
		if problem := WaitingForHost(e); problem != "" {
			return "⏸ Pipeline waiting for the host — " + problem
		}
		return "⏸ Pipeline interrupted — " + Duration(e.Duration)
	case engine.EventStageStarted:
		return stageStarted(e, name, branch)
	case engine.EventStageCompleted:
		return stageCompleted(e, name, branch)
	case engine.EventStageFailed:
		return stageFailed(e, name, branch)
	case engine.EventStageRetrying:
		return fmt.Sprintf("  ↻ Retry: %s (%d/%d) in %s%s", name, e.Attempt, e.MaxAttempt, Duration(e.Delay), branch)
	case engine.EventDecision:
		return decisionLine(e.Decision, branch)
	case engine.EventParallelStarted, engine.EventParallelBranchStarted, engine.EventParallelBranchCompleted, engine.EventParallelCompleted:
		return parallelLine(e, name)
	case engine.EventInterviewStarted:
		return "  ? " + questionLine(e.Question)
	case engine.EventInterviewCompleted:
		return "  ✎ " + answerLine(e.Answer)
	case engine.EventInterviewTimeout:
		return fmt.Sprintf("  ⏱ %s: no answer after %s", name, Duration(e.Duration))
	case engine.EventWarning:
		if q := e.Question; q != nil && q.Unmatched != "" {
			return fmt.Sprintf("  ! answer %q at %s matches no option; asking again (%d of %d)", q.Unmatched, e.NodeID, e.Attempt, e.MaxAttempt)
		}
		return "  ! " + e.Message
	case engine.EventAgentResponse:
		return "    │ " + truncate(firstLine(e.Message), 200)
	case engine.EventToolHook:
		return hookLine(e, branch)
	case engine.EventContextUpdated:
		return "    context: " + strings.Join(dataStrings(e.Data, "keys"), ", ")
	case engine.EventWorkspaceChanged:
		return changesLine(name, branch, e.Changes)
	case engine.EventStageOutput:
		return outputLine(e)
	case engine.EventWalkerSwitch:
		return walkerLine(e.Switch, name, branch)
	case engine.EventChildStarted:
		return fmt.Sprintf("  ↳ %s runs %s as run %s%s", name, Visible(e.Message), childID(dataString(e.Data, engine.DataChildRunID)), branch)
	case engine.EventSteered:
		if child := dataString(e.Data, engine.DataChildRunID); child != "" {
			return fmt.Sprintf("  ➜ %s steers run %s: %s", name, childID(child), truncate(firstLine(Visible(e.Message)), 200))
		}
		return fmt.Sprintf("  ➜ %s is steered by its manager: %s", name, truncate(firstLine(Visible(e.Message)), 200))
	case engine.EventCheckpointSaved:
		return "    checkpoint after " + e.NodeID
	case engine.EventPullRequestOpened:
		number, url, _ := PullRequestOf(e)
		return fmt.Sprintf("  ⇡ %s: %s — %s%s", name, pullRequestDone(e, number), Visible(url), branch)
	}
	return ""
}

// StageName is how a stage is named: its label, else its id, with its
// parallel branch when it runs in one.
func StageName(label, nodeID, branch string) string {
	name := label
	if name == "" {
		name = nodeID
	}
	if branch != "" {
		name += " [branch " + branch + "]"
	}
	return name
}

func byWhom(by string) string {
	if by == "" {
		return ""
	}
	return " by " + by
}

func stageStarted(e engine.Event, name, branch string) string {
	if handler(e) == engine.TypeStart {
		return ""
	}
	again := ""
	if visit := dataInt(e.Data, "visit"); visit > 1 {
		again = fmt.Sprintf(" — visit %d", visit) // a loop brought the run back here
	}
	if e.Index > 0 {
		return fmt.Sprintf("  → %s (%d/%d)%s%s%s", name, e.Index, e.Total, wornBy(e), again, branch)
	}
	return fmt.Sprintf("  → %s%s%s%s", name, wornBy(e), again, branch)
}

// attempts says how many attempts a stage's outcome took, when it took
// more than one: " (attempt 2)".
func attempts(e engine.Event) string {
	if e.Attempt > 1 {
		return fmt.Sprintf(" (attempt %d)", e.Attempt)
	}
	return ""
}

// wornBy says who works a stage: " as seeker wearing recall, forge".
func wornBy(e engine.Event) string {
	s := ""
	if e.Persona != "" {
		s += " as " + e.Persona
	}
	if len(e.Masks) > 0 {
		s += " wearing " + strings.Join(e.Masks, ", ")
	}
	return s
}

func stageCompleted(e engine.Event, name, branch string) string {
	if h := handler(e); h == engine.TypeStart || h == engine.TypeExit {
		return ""
	}
	suffix := ""
	if e.Status != "" && e.Status != engine.StatusSuccess {
		suffix = " (" + string(e.Status) + ")"
	}
	return fmt.Sprintf("  ✓ %s — %s%s%s%s", name, Duration(e.Duration), attempts(e), suffix, branch)
}

func stageFailed(e engine.Event, name, branch string) string {
	switch {
	case e.WillRetry:
		return fmt.Sprintf("  ✗ %s — %s (attempt %d/%d)%s", name, e.Message, e.Attempt, e.MaxAttempt, branch)
	case e.Message == "":
		return fmt.Sprintf("  ✗ %s — %s%s%s", name, Duration(e.Duration), attempts(e), branch)
	case strings.Contains(e.Message, "attempts"): // "max retries exceeded after 3 attempts: …"
		return fmt.Sprintf("  ✗ %s — %s — %s%s", name, Duration(e.Duration), e.Message, branch)
	}
	return fmt.Sprintf("  ✗ %s — %s%s — %s%s", name, Duration(e.Duration), attempts(e), e.Message, branch)
}

func parallelLine(e engine.Event, name string) string {
	switch e.Type {
	case engine.EventParallelStarted:
		return fmt.Sprintf("  ⑂ %s: %d branches", name, dataInt(e.Data, "branch_count"))
	case engine.EventParallelBranchStarted:
		return fmt.Sprintf("  ⑂ branch %s started", e.Branch)
	case engine.EventParallelBranchCompleted:
		mark, msg := "✓", ""
		if !e.Status.IsSuccess() {
			mark = "✗"
			if e.Message != "" {
				msg = " — " + e.Message
			}
		}
		return fmt.Sprintf("  ⑂ %s branch %s — %s%s", mark, e.Branch, Duration(e.Duration), msg)
	}
	return fmt.Sprintf("  ⑂ %s: %d succeeded, %d failed — %s", name,
		dataInt(e.Data, "success_count"), dataInt(e.Data, "failure_count"), Duration(e.Duration))
}

func decisionLine(d *engine.Decision, branch string) string {
	if d == nil {
		return ""
	}
	to := d.To
	if to == "" {
		to = "(nowhere)"
	}
	line := fmt.Sprintf("  ⤷ %s → %s", d.From, to)
	if why := decisionReason(d); why != "" {
		line += " (" + why + ")"
	}
	return line + branch
}

// decisionReason says why an edge was taken in people's words, not the
// engine's rule names (preferred_label, fail_condition, only_edge…): ""
// when there was nothing to choose.
func decisionReason(d *engine.Decision) string {
	switch d.Rule {
	case "condition":
		return "when " + d.Values["condition"]
	case "fail_condition":
		return "it failed: " + d.Values["condition"]
	case "preferred_label":
		return d.Values["preferred_label"]
	case "suggested_next_ids":
		return "as the stage suggested"
	case "only_edge":
		return ""
	case "weight":
		return "the heaviest edge"
	case "lexical":
		return "the first of equal edges"
	case "fallback_any_edge":
		return "no condition held: the first edge"
	case "fail_to_conditional":
		return "it failed: deciding there"
	case "retry_target", "fallback_retry_target", "graph_retry_target", "graph_fallback_retry_target":
		return "it failed: trying again from there"
	case "goal_gate_retry":
		return "goal gate " + d.Values["gate"] + " not met yet"
	case "fan_in":
		return "every branch is done"
	case "condition_error":
		return "a condition could not be checked"
	case "none", "":
		return ""
	}
	return strings.ReplaceAll(d.Rule, "_", " ")
}

func questionLine(q *engine.Question) string {
	if q == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString(QuestionText(*q))
	for _, o := range q.Options {
		fmt.Fprintf(&b, "  [%s] %s", o.Key, engine.NormalizeLabelDisplay(o.Label))
	}
	return b.String()
}

func answerLine(a *engine.Answer) string {
	if a == nil {
		return ""
	}
	by := ""
	if a.By != "" {
		by = " (" + a.By + ")"
	}
	switch a.Kind {
	case engine.AnswerText:
		return "answered: " + truncate(a.Text, 200) + by
	case engine.AnswerSkipped:
		return "skipped" + by
	}
	return "answered: " + a.Value + by
}

// Event.Data read type-tolerantly: an event decoded from JSON (the trace,
// the store) holds float64 (or json.Number) where the engine put an int,
// and []any where it put []string.

// handler is the node handler type the engine reports on stage events.
func handler(e engine.Event) string {
	h, _ := e.Data["handler"].(string)
	return h
}

func dataInt(data map[string]any, key string) int {
	switch v := data[key].(type) {
	case int:
		return v
	case int64:
		return int(v)
	case float64:
		return int(v)
	case json.Number:
		n, _ := v.Int64()
		return int(n)
	}
	return 0
}

func dataStrings(data map[string]any, key string) []string {
	switch v := data[key].(type) {
	case []string:
		return v
	case []any:
		out := make([]string, 0, len(v))
		for _, x := range v {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// outputLine shows a stage's typed output as its fields, compactly:
// "    output: confidence=0.87, verdict=ship (artifacts/review.json)".
func outputLine(e engine.Event) string {
	obj, _ := e.Data["output"].(map[string]any)
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		v, err := json.Marshal(obj[k])
		text := string(v)
		if s, isString := obj[k].(string); isString || err != nil {
			text = s
		}
		parts = append(parts, k+"="+truncate(text, 60))
	}
	line := "    output: " + truncate(strings.Join(parts, ", "), 300)
	if path, _ := e.Data["artifact"].(string); path != "" {
		line += " (" + path + ")"
	}
	return line
}

// walkerLine says who the team walk picked for a persona=auto stage and
// why: "  ⇄ F3 Investigate: seeker takes over from sentinel — highest
// affinity for investigate (seeker 0.90, sentinel 0.60, herald 0.20
// avoided: fire fights the zone's water)".
func walkerLine(a *team.Assignment, name, branch string) string {
	if a == nil {
		return ""
	}
	return fmt.Sprintf("  ⇄ %s: %s%s", name, WalkerSwitch(a), branch)
}

// WalkerSwitch words a team walk's assignment: who, and why, with every
// member's affinity ("seeker stays — at home in frontcourt: …").
func WalkerSwitch(a *team.Assignment) string {
	if a == nil {
		return ""
	}
	var who string
	switch {
	case a.Previous == "":
		who = a.Walker + " takes it"
	case !a.Switched():
		who = a.Walker + " stays"
	default:
		who = a.Walker + " takes over from " + a.Previous
	}
	var why string
	switch a.Rule {
	case team.RuleAffinity:
		why = "highest affinity for " + a.Step
	case team.RuleElement:
		why = "tied on affinity, and of the zone's element " + a.ZoneElement
	case team.RuleTeamOrder:
		why = "tied on affinity, first in the team"
	case team.RuleStickiness:
		why = fmt.Sprintf("at home in %s: %s's affinity is not more than %.2f higher", a.Zone, a.Challenger, a.Margin)
	case team.RuleAllAvoided:
		why = "every member's element fights the zone's " + a.ZoneElement + ", so none was passed over; highest affinity"
	default:
		why = a.Rule
	}
	ranked := slices.Clone(a.Candidates)
	slices.SortStableFunc(ranked, func(x, y team.Candidate) int { return cmp.Compare(y.Affinity, x.Affinity) })
	parts := make([]string, len(ranked))
	for i, c := range ranked {
		parts[i] = fmt.Sprintf("%s %.2f", c.Persona, c.Affinity)
		if c.Avoided {
			parts[i] += fmt.Sprintf(" avoided: %s fights the zone's %s", c.Element, a.ZoneElement)
		}
	}
	return fmt.Sprintf("%s — %s (%s)", who, why, strings.Join(parts, ", "))
}

func dataString(data map[string]any, key string) string {
	s, _ := data[key].(string)
	return s
}

// childID is a child run's id as people read it: the short id of a run of
// its own (runs.ShortID), the whole id of one kept in its parent's stage
// directory (<parent>.<node>-<visit>).
func childID(id string) string {
	if short := runs.ShortID(id); len(short) >= 6 {
		return Visible(short)
	}
	return Visible(id)
}

// hookLine tells one run of a tool hook: which phase, around which tool,
// how it ended, and the first line of what it said.
func hookLine(e engine.Event, branch string) string {
	phase, tool := dataString(e.Data, "phase"), dataString(e.Data, "tool")
	what := fmt.Sprintf("%s-hook", phase)
	if tool != "" {
		what += " of " + Visible(tool)
	}
	code := ""
	if c, ok := e.Data["exit_code"]; ok {
		code = fmt.Sprint(c)
	}
	end := "passed"
	switch blocked, _ := e.Data["blocked"].(bool); {
	case blocked:
		end = "exited " + code + " and blocked the call"
	case code != "0" && code != "":
		end = "exited " + code
	}
	line := fmt.Sprintf("    ⚓ %s %s%s", what, end, branch)
	if out := firstLine(e.Message); out != "" {
		line += ": " + truncate(Visible(out), 200)
	}
	return line
}
