package engine

import (
	"context"
	"fmt"
	"strings"

	"nanohost/internal/pipeline/refs"
)

// Context keys a tool node sets.
const (
	KeyToolOutput   = "tool.output"
	KeyToolExitCode = "tool.exit_code"
)

// toolHandler hands the node's tool_command to the Backend (Kind tool): the
// host never runs it itself; an agent container does and reports back
// (host document). Exit status 0 is SUCCESS and anything else FAIL, unless
// the backend or the agent reported an explicit outcome.
type toolHandler struct{}

func (toolHandler) Execute(ctx context.Context, st *Stage) (Outcome, error) {
	command := strings.TrimSpace(st.Node.Attrs["tool_command"])
	if command == "" {
		return Outcome{Status: StatusFail, FailureReason: fmt.Sprintf("tool node %s has no tool_command", st.Node.ID)}, nil
	}
	// Each value is one shell word: a context value is never code.
	command, err := expandRefs(st, "tool_command", command, refs.ShellQuote)
	if err != nil {
		return refFailure(err)
	}
	reply, err := callBackend(ctx, st, KindTool, command, command)
	if err != nil {
		return Outcome{}, err
	}
	output := reply.res.Output
	if output == "" || reply.res.Text == "" {
		output = reply.clean // the tag-free form of whichever carried the report
	}
	out := reply.out
	exited := fmt.Sprintf("tool_command exited with status %d: %s", reply.res.ExitCode, lastLine(output))
	switch {
	case reply.source == "default" && reply.res.ExitCode == 0: // no explicit outcome: the exit status decides
		out = Outcome{Status: StatusSuccess, Notes: "tool completed: " + command}
	case reply.source == "default":
		out = Outcome{Status: StatusFail, FailureReason: exited}
	case out.Status == StatusFail && reply.res.ExitCode != 0 && reply.noReason:
		out.FailureReason = exited // a reported fail without a reason: the exit status is one
	}
	out.ContextUpdates = withUpdates(out.ContextUpdates, map[string]any{
		KeyToolOutput:   tail(output, maxToolOutput),
		KeyToolExitCode: reply.res.ExitCode,
		KeyLastStage:    st.Node.ID,
	})
	return out, nil
}

// lastLine is the last non-empty line of s, bounded, for failure reasons.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return truncate(strings.TrimSpace(lines[len(lines)-1]), 200)
}
