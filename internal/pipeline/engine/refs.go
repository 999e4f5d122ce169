package engine

import (
	"fmt"
	"strings"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/cond"
	"nanohost/internal/pipeline/refs"
)

// refError is a stage that cannot start because a ${…} reference cannot
// be expanded: a missing value under strict_vars, or an expansion over the
// prepared-text bound. It becomes the stage's FAIL reason.
type refError struct{ reason string }

func (e *refError) Error() string { return e.reason }

// expandRefs puts the run's values in place of the ${…} references of
// text, the node's `what` (prompt, label, tool_command); quote is
// refs.ShellQuote for a command. A reference without a value reads as
// empty with a Warning, or fails the stage when strict_vars is set on the
// node or the graph. The text may not grow past pipeline.MaxExpandedSize.
func expandRefs(st *Stage, what, text string, quote refs.Quote) (string, error) {
	if !strings.Contains(text, "${") {
		return text, nil
	}
	lookup := st.w.r.lookup(st.Context)
	out, missing, err := refs.Expand(text, func(key string) (string, bool) {
		v, ok := lookup(key)
		if !ok {
			if rest, isContext := strings.CutPrefix(key, "context."); isContext {
				v, ok = lookup(rest)
			}
		}
		if !ok || v == nil {
			return "", false
		}
		return cond.Text(v), true
	}, quote, pipeline.MaxExpandedSize)
	if err != nil {
		return "", &refError{fmt.Sprintf("%s's %s: %v", st.Node.ID, what, err)}
	}
	for _, key := range missing {
		if strictVars(st) {
			return "", &refError{fmt.Sprintf("%s's %s refers to ${%s}, which no stage has set (strict_vars)", st.Node.ID, what, key)}
		}
		st.Warn(fmt.Sprintf("%s's %s refers to ${%s}, which no stage has set; it reads as empty", st.Node.ID, what, key))
	}
	return out, nil
}

func strictVars(st *Stage) bool {
	if v, ok := st.Node.Attrs["strict_vars"]; ok {
		return isTrue(v)
	}
	return isTrue(st.Graph.Attrs["strict_vars"])
}

// refFailure is the outcome of a stage whose references failed, or the error.
func refFailure(err error) (Outcome, error) {
	if re, ok := err.(*refError); ok {
		return Outcome{Status: StatusFail, FailureReason: re.reason}, nil
	}
	return Outcome{}, err
}
