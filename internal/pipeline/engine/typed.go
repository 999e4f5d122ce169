package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"nanohost/internal/pipeline/fidelity"
	"nanohost/internal/pipeline/output"
)

// ArtifactsDir is the directory of a run (beside its stage directories)
// holding each stage's last valid typed output as <node id>.json.
const ArtifactsDir = "artifacts"

// ArtifactsPath is where an agent finds the run's artifacts: the container
// runtime mounts ArtifactsDir there, read-only, and the preamble lists them.
const ArtifactsPath = "/workspace/.nanohost/artifacts"

// artifacts lists the run's stored artifacts for the preamble, by node id
// in graph order, at their path inside the agent's container.
func (r *run) artifacts() []fidelity.Artifact {
	if r.root == "" {
		return nil
	}
	entries, err := os.ReadDir(filepath.Join(r.root, ArtifactsDir))
	if err != nil {
		return nil
	}
	have := make(map[string]bool, len(entries))
	for _, e := range entries {
		if id, ok := strings.CutSuffix(e.Name(), ".json"); ok && e.Type().IsRegular() {
			have[id] = true
		}
	}
	var out []fidelity.Artifact
	for _, n := range r.g.Nodes {
		if have[n.ID] {
			out = append(out, fidelity.Artifact{Node: n.ID, Path: ArtifactsPath + "/" + n.ID + ".json"})
		}
	}
	return out
}

// typedOutput checks a stage's typed output against its output_schema
// (docs/semantics.md, "Typed stage outputs"): a valid object's fields join
// the outcome's context updates and the object is stored as the stage's
// artifact; an invalid or missing one is sent back to the agent with the
// validator's messages, output_retries times (default 1), then the stage
// fails naming the first problem. A stage that failed on its own is not
// asked for an output.
func typedOutput(ctx context.Context, st *Stage, kind RequestKind, prompt, toolCommand string, reply agentReply, schema *output.Schema) (agentReply, error) {
	id := st.Node.ID
	retries, err := st.Node.Attrs.Int("output_retries", 1)
	if err != nil || retries < 0 {
		retries = 1
	}
	for ask := 0; ; ask++ {
		if !reply.out.Status.IsSuccess() {
			return reply, nil
		}
		obj, problems := readOutput(st, reply.res, schema)
		if problems == nil {
			if err := storeArtifact(st, obj); err != nil {
				return reply, err
			}
			reply.out.ContextUpdates = withUpdates(reply.out.ContextUpdates, output.Fields(id, obj))
			return reply, nil
		}
		if ask >= retries {
			reply.out = Outcome{Status: StatusFail, FailureReason: fmt.Sprintf("%s's output does not match its output_schema: %s", id, problems[0])}
			return reply, nil
		}
		st.Warn(fmt.Sprintf("%s's output does not match its output_schema (%s); asking again (%d of %d)", id, problems[0], ask+1, retries))
		if err := clearStageFile(st, output.File); err != nil {
			return reply, err
		}
		st.reask = ask + 1
		if reply, err = callBackend(ctx, st, kind, reaskPrompt(prompt, problems), toolCommand); err != nil {
			return reply, err
		}
	}
}

// readOutput finds the stage's output — output.json in its stage
// directory, else the last ```json block of its answer — and checks it.
func readOutput(st *Stage, res Result, schema *output.Schema) (map[string]any, []output.Problem) {
	if st.dirReady {
		data, err := readStageFile(filepath.Join(st.StageDir, output.File), output.MaxOutput)
		switch {
		case err == nil:
			return schema.Check(data)
		case !errors.Is(err, fs.ErrNotExist):
			return nil, []output.Problem{{Msg: "output.json cannot be read: " + err.Error()}}
		}
	}
	text := res.Text
	if text == "" {
		text = res.Output
	}
	body, ok := output.Find(text)
	if !ok {
		return nil, []output.Problem{{Msg: "no output: the answer has no ```json block and the stage directory no output.json"}}
	}
	return schema.Check([]byte(body))
}

// storeArtifact writes the valid object as the stage's output.json and as
// the run's artifacts/<node>.json, and tells the event log.
func storeArtifact(st *Stage, obj map[string]any) error {
	data, err := json.MarshalIndent(obj, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s's output: %w", st.Node.ID, err)
	}
	data = append(data, '\n')
	if st.dirReady {
		if err := writeStageFile(filepath.Join(st.StageDir, output.File), data); err != nil {
			return fmt.Errorf("store %s's output: %w", st.Node.ID, err)
		}
	}
	rel := filepath.Join(ArtifactsDir, st.Node.ID+".json")
	if root := st.w.r.root; root != "" {
		if _, err := ensureRealDir(filepath.Join(root, ArtifactsDir)); err != nil {
			return fmt.Errorf("artifacts directory: %w", err)
		}
		if err := writeStageFile(filepath.Join(root, rel), data); err != nil {
			return fmt.Errorf("store %s's artifact: %w", st.Node.ID, err)
		}
	}
	st.Emit(Event{Type: EventStageOutput, Label: st.Node.Label(), Data: map[string]any{"output": obj, "artifact": rel}})
	return nil
}

// clearStageFile removes a file an earlier answer left in the stage directory.
func clearStageFile(st *Stage, name string) error {
	if !st.dirReady {
		return nil
	}
	if err := os.Remove(filepath.Join(st.StageDir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("clear stale %s: %w", name, err)
	}
	return nil
}

// outputInstructions tell the agent how to return its typed output.
func outputInstructions(schema *output.Schema) string {
	return "\n\n## Your output\n\nEnd your answer with one fenced ```json block holding a single JSON object " +
		"that is valid against this JSON Schema (tags, if any, go after it). The next stages read its fields.\n\n```json\n" +
		strings.TrimSpace(schema.Source) + "\n```\n"
}

// reaskPrompt sends the validator's messages back with the stage's prompt.
func reaskPrompt(prompt string, problems []output.Problem) string {
	var b strings.Builder
	b.WriteString(prompt)
	b.WriteString("\n\n## Your previous output was not accepted\n\nIt does not match the output_schema:\n")
	for i, p := range problems {
		if i == 10 {
			fmt.Fprintf(&b, "- … and %d more\n", len(problems)-i)
			break
		}
		b.WriteString("- " + p.String() + "\n")
	}
	b.WriteString("\nAnswer again, ending with one fenced ```json block holding the whole corrected object.\n")
	return b.String()
}
