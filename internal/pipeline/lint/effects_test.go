package lint

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// effect is where an accepted attribute's effect is proven: a test (by
// name) in a file (relative to the repository root) that uses the
// attribute and asserts what it changes. An attribute that changes no
// behaviour on purpose says so in informational instead, and
// docs/semantics.md must say it too.
type effect struct {
	test, file    string
	informational string
}

// attributeEffects registers every attribute of Attributes. A new key
// needs an entry here — the test that proves what it does — or
// TestEveryAcceptedAttributeHasAnEffect fails naming it: lint must never
// accept an attribute that silently does nothing (issue 27).
var attributeEffects = map[string]effect{
	// Graph.
	"goal":                  {test: "TestBuiltinsExpandGoalAndApplyStylesheet", file: "internal/pipeline/transform/transform_test.go"},
	"inputs":                {test: "TestRunInputsReachTheContextAndRequiredOnesAreChecked", file: "internal/runs/inputs_test.go"},
	"label":                 {test: "TestHumanAnswerMatchesKeyLabelOrTarget", file: "internal/pipeline/engine/human_test.go"},
	"model_stylesheet":      {test: "TestStylesheetModelOverrideReachesTheBackend", file: "internal/pipeline/engine/agent_test.go"},
	"default_max_retry":     {test: "TestBackoffDelaysAndBudgets", file: "internal/pipeline/engine/retry_test.go"},
	"default_max_retries":   {test: "TestBackoffDelaysAndBudgets", file: "internal/pipeline/engine/retry_test.go"},
	"default_fidelity":      {test: "TestFullFidelityThreadsAndEdgeOverride", file: "internal/pipeline/engine/agent_test.go"},
	"retry_target":          {test: "TestFailRetryTargetChain", file: "internal/pipeline/engine/routing_test.go"},
	"fallback_retry_target": {test: "TestFailRetryTargetChain", file: "internal/pipeline/engine/routing_test.go"},
	"rankdir":               {test: "TestSVGLeftToRight", file: "internal/pipeline/render/svg_test.go"},
	"max_steps":             {test: "TestMaxStepsStopsAnEndlessLoop", file: "internal/pipeline/engine/goalgate_test.go"},
	"max_restarts":          {test: "TestLoopRestartStartsAFreshContextAndDirectory", file: "internal/pipeline/engine/agent_test.go"},
	"max_tokens":            {test: "TestBudgetsStopARunThatSpendsTooMuch", file: "internal/pipeline/engine/agent_test.go"},
	"max_cost_usd":          {test: "TestBudgetsStopARunThatSpendsTooMuch", file: "internal/pipeline/engine/agent_test.go"},
	"retry_policy":          {test: "TestBackoffDelaysAndBudgets", file: "internal/pipeline/engine/retry_test.go"},
	"strict_vars":           {test: "TestStrictVarsFailsTheStageOnAMissingValue", file: "internal/pipeline/engine/refs_test.go"},
	"team":                  {test: "TestAutoPersonaPicksHighestAffinityWithStickinessAndTies", file: "internal/pipeline/engine/team_test.go"},
	"adversarial":           {test: "TestDestructiveCycleAvoidedOutsideCourt", file: "internal/pipeline/engine/team_test.go"},
	// Tool hooks (graph or node), in the agent's container.
	"tool_hooks.pre":  {test: "TestToolHooksRunInTheContainerAroundToolCalls", file: "internal/container/hooks_test.go"},
	"tool_hooks.post": {test: "TestToolHooksRunInTheContainerAroundToolCalls", file: "internal/container/hooks_test.go"},
	// Manager loop and sub-pipelines.
	"stack.child_dotfile":    {test: "TestManagerSteersTheChild", file: "internal/pipeline/engine/manager_test.go"},
	"stack.child_workdir":    {test: "TestManagerChildWorkdirStaysInTheWorkspace", file: "internal/pipeline/engine/manager_test.go"},
	"stack.child_autostart":  {test: "TestManagerObservesAChildStartedElsewhere", file: "internal/pipeline/engine/manager_test.go"},
	"manager.poll_interval":  {test: "TestManagerObservesAChildStartedElsewhere", file: "internal/pipeline/engine/manager_test.go"},
	"manager.max_cycles":     {test: "TestManagerLoopStopConditionAndMaxCycles", file: "internal/pipeline/engine/manager_test.go"},
	"manager.stop_condition": {test: "TestManagerLoopStopConditionAndMaxCycles", file: "internal/pipeline/engine/manager_test.go"},
	"manager.actions":        {test: "TestManagerSteersTheChild", file: "internal/pipeline/engine/manager_test.go"},
	"pipeline":               {test: "TestSubPipelineRunsAsAChildAndReturnsOutputs", file: "internal/pipeline/engine/subpipeline_test.go"},
	// Node.
	"shape":                {test: "TestParallelFanOutAndFanIn", file: "internal/pipeline/engine/parallel_test.go"},
	"type":                 {test: "TestCustomHandlerIsRegisteredAndRoutes", file: "internal/pipeline/engine/engine_test.go"},
	"prompt":               {test: "TestRequestCarriesNodeSettingsAndFidelity", file: "internal/pipeline/engine/agent_test.go"},
	"max_retries":          {test: "TestRetryOutcomeIsRetriedWithinTheBudget", file: "internal/pipeline/engine/retry_test.go"},
	"goal_gate":            {test: "TestGoalGateBlocksExitAndJumpsToRetryTarget", file: "internal/pipeline/engine/goalgate_test.go"},
	"fidelity":             {test: "TestFullFidelityThreadsAndEdgeOverride", file: "internal/pipeline/engine/agent_test.go"},
	"thread_id":            {test: "TestFullFidelityThreadsAndEdgeOverride", file: "internal/pipeline/engine/agent_test.go"},
	"class":                {test: "TestSpecificityShapeClassID", file: "internal/pipeline/stylesheet/stylesheet_test.go"},
	"timeout":              {test: "TestRequestCarriesNodeSettingsAndFidelity", file: "internal/pipeline/engine/agent_test.go"},
	"llm_model":            {test: "TestProviderPicksTheAgent", file: "internal/container/provider_test.go"},
	"llm_provider":         {test: "TestProviderPicksTheAgent", file: "internal/container/provider_test.go"},
	"reasoning_effort":     {test: "TestProviderPicksTheAgent", file: "internal/container/provider_test.go"},
	"auto_status":          {test: "TestAutoStatusTreatsNoStatusAsSuccess", file: "internal/pipeline/engine/autostatus_test.go"},
	"allow_partial":        {test: "TestRetriesExhaustedFailUnlessAllowPartial", file: "internal/pipeline/engine/retry_test.go"},
	"human.default_choice": {test: "TestHumanTimeoutTakesDefaultChoiceElseRetries", file: "internal/pipeline/engine/human_test.go"},
	"join_policy":          {test: "TestJoinPolicies", file: "internal/pipeline/engine/parallel_test.go"},
	"error_policy":         {test: "TestErrorPolicyIgnoreDropsFailuresFromResults", file: "internal/pipeline/engine/parallel_test.go"},
	"max_parallel":         {test: "TestMaxParallelBoundsConcurrency", file: "internal/pipeline/engine/parallel_test.go"},
	"join_k":               {test: "TestJoinPolicies", file: "internal/pipeline/engine/parallel_test.go"},
	"join_quorum":          {test: "TestJoinPolicies", file: "internal/pipeline/engine/parallel_test.go"},
	"foreach":              {test: "TestForeachFanOutRunsEachItemOnceAcrossAResume", file: "cmd/nanohost/pipeline_foreach_test.go"},
	"max_items":            {test: "TestForeachReadsListsAndRefusesTooMany", file: "internal/pipeline/engine/foreach_test.go"},
	"tool_command":         {test: "TestToolNodeGoesThroughTheBackendAndUsesTheExitCode", file: "internal/pipeline/engine/agent_test.go"},
	"isolated":             {test: "TestRequestCarriesNodeSettingsAndFidelity", file: "internal/pipeline/engine/agent_test.go"},
	"output_schema":        {test: "TestAnOutputFixedOnTheReAskIsTaken", file: "internal/pipeline/engine/typed_test.go"},
	"output_retries":       {test: "TestAnOutputFixedOnTheReAskIsTaken", file: "internal/pipeline/engine/typed_test.go"},
	"approvers":            {test: "TestHostRefusesWebAnswersToGatesWithApprovers", file: "internal/web/host_test.go"},
	"persona":              {test: "TestCustomPersonaOverridesTheBuiltinInThePrompt", file: "internal/pipeline/engine/identity_test.go"},
	"masks":                {test: "TestPersonaPreambleAndMasksReachThePrompt", file: "internal/pipeline/engine/identity_test.go"},
	"element":              {test: "TestElementTraitsSetRetriesAndConvergence", file: "internal/pipeline/engine/traits_test.go"},
	"convergence":          {test: "TestElementTraitsSetRetriesAndConvergence", file: "internal/pipeline/engine/traits_test.go"},
	"shortcut_affinity":    {test: "TestElementTraitsSetRetriesAndConvergence", file: "internal/pipeline/engine/traits_test.go"},
	"evidence_depth":       {test: "TestElementTraitsSetRetriesAndConvergence", file: "internal/pipeline/engine/traits_test.go"},
	"step":                 {test: "TestStepKeysTheAffinity", file: "internal/pipeline/team/step_test.go"},
	// Edge.
	"condition":    {test: "TestConditionMatchWinsOverWeight", file: "internal/pipeline/engine/routing_test.go"},
	"weight":       {test: "TestWeightBreaksTiesAmongUnconditionalEdges", file: "internal/pipeline/engine/routing_test.go"},
	"loop_restart": {test: "TestLoopRestartStartsAFreshContextAndDirectory", file: "internal/pipeline/engine/agent_test.go"},
	"freeform":     {test: "TestFreeformEdgeTakesText", file: "internal/pipeline/engine/human_test.go"},
	"shortcut":     {test: "TestShortcutEdgeIsIgnoredBelowHalfAffinity", file: "internal/pipeline/engine/traits_test.go"},
}

// No silent attribute: every key lint accepts (the attribute table, not
// Graphviz's layout keys) names the test that proves its effect — a test
// that exists, in a file that uses the key — or is documented as
// informational. A key added without one fails here, by name.
func TestEveryAcceptedAttributeHasAnEffect(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	semantics, err := os.ReadFile(filepath.Join(root, "docs", "semantics.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	read := func(path string) string {
		if s, ok := files[path]; ok {
			return s
		}
		data, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			t.Errorf("%s: %v", path, err)
		}
		files[path] = string(data)
		return files[path]
	}
	seen := map[string]bool{}
	for _, a := range Attributes {
		if seen[a.Key] {
			continue
		}
		seen[a.Key] = true
		e, ok := attributeEffects[a.Key]
		switch {
		case !ok:
			t.Errorf("attribute %q is accepted by lint but no test proves it does anything: add it to attributeEffects "+
				"(internal/pipeline/lint/effects_test.go) with the test that shows its effect, or mark it informational and say why in docs/semantics.md", a.Key)
			continue
		case e.informational != "":
			if !strings.Contains(string(semantics), "`"+a.Key+"`") {
				t.Errorf("attribute %q is informational (%s), but docs/semantics.md does not say so", a.Key, e.informational)
			}
			continue
		}
		src := read(e.file)
		if !regexp.MustCompile(`(?m)^func ` + regexp.QuoteMeta(e.test) + `\(t \*testing\.T\)`).MatchString(src) {
			t.Errorf("attribute %q: its effect is said to be proven by %s in %s, which has no such test", a.Key, e.test, e.file)
			continue
		}
		uses := regexp.MustCompile(`(^|[^\w.])` + regexp.QuoteMeta(a.Key) + `\s*(=|:|")`)
		if !uses.MatchString(src) {
			t.Errorf("attribute %q: %s (%s) never uses it", a.Key, e.test, e.file)
		}
	}
	for key := range attributeEffects {
		if !seen[key] {
			t.Errorf("attributeEffects lists %q, which lint does not accept: remove it", key)
		}
	}
}
