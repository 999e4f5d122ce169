package container

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"nanohost/internal/mounts"
	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/frontend"
	"nanohost/internal/pipeline/mask"
)

// maskFixture is a mask granting a folder and a skill from under an
// allowed root, with the allowlist that allows it.
type maskFixture struct {
	root, prior, skill string
	masks              mask.Set
	policy             *mounts.Policy
}

func newMaskFixture(t *testing.T) maskFixture {
	t.Helper()
	root, _ := filepath.EvalSymlinks(t.TempDir())
	f := maskFixture{root: root, prior: filepath.Join(root, "rca-db"), skill: filepath.Join(root, "skills", "rca-search")}
	for path, content := range map[string]string{
		filepath.Join(f.prior, "rca-1.md"):    "holdover timeout changed in 4f2a1c9\n",
		filepath.Join(f.skill, "SKILL.md"):    "---\nname: rca-search\ndescription: search prior analyses\n---\n",
		filepath.Join(root, "empty", "x.txt"): "not a skill",
	} {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	allow := filepath.Join(t.TempDir(), "allowlist.json")
	if err := os.WriteFile(allow, []byte(fmt.Sprintf(`{"allowed_roots": [{"path": %q}]}`, root)), 0o644); err != nil {
		t.Fatal(err)
	}
	var err error
	if f.policy, err = mounts.LoadPolicy(allow); err != nil {
		t.Fatal(err)
	}
	f.masks, err = mask.Parse("masks.yaml", []byte(fmt.Sprintf(`masks:
  recall:
    title: Mask of Recall
    nodes: [recall, probe]
    mounts: ["%s:prior-rca"]
    skills: ["%s"]
    context: {prior_rca_available: "true"}
  plain:
    nodes: ["*"]
`, f.prior, f.skill)))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestMaskMountsGoThroughTheAllowlist(t *testing.T) {
	f := newMaskFixture(t)
	got, errs := mounts.MaskGrants(f.policy, f.masks)
	if len(errs) > 0 {
		t.Fatalf("refused: %v", errs)
	}
	want := []mounts.Mount{
		{Source: f.prior, Target: "/workspace/masks/recall/prior-rca", ReadOnly: true},
		{Source: f.skill, Target: "/workspace/mask-skills/recall/rca-search", ReadOnly: true},
	}
	if !slices.Equal(got["recall"], want) {
		t.Errorf("recall mounts = %+v, want %+v", got["recall"], want)
	}
	if ms, ok := got["plain"]; !ok || len(ms) != 0 {
		t.Errorf("a mask granting no folder still needs its (empty) entry: %v %v", ms, ok)
	}

	// Outside the allowed roots, a credentials folder, a skill without SKILL.md:
	// each refused with where it was configured and why.
	outside := t.TempDir()
	bad, err := mask.Parse("bad.yaml", []byte(fmt.Sprintf(`masks:
  leaky:
    nodes: [a]
    mounts: ["%s", "%s"]
    skills: ["%s"]
`, outside, filepath.Join(f.root, ".ssh")+":keys", filepath.Join(f.root, "empty"))))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(f.root, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	_, errs = mounts.MaskGrants(f.policy, bad)
	var msgs []string
	for _, e := range errs {
		msgs = append(msgs, e.Error())
	}
	joined := strings.Join(msgs, "\n")
	for _, want := range []string{"mask leaky: mounts[0]", "not under an allowed root", "mounts[1]", "blocked pattern \".ssh\"", "skills[0]", "has no SKILL.md"} {
		if !strings.Contains(joined, want) {
			t.Errorf("refusals do not say %q:\n%s", want, joined)
		}
	}
	var me *mounts.MaskMountError
	if len(errs) != 3 || !errors.As(errs[0], &me) || me.Mask != "leaky" {
		t.Errorf("errors = %v", errs)
	}
}

// The test: a mask's folder is visible, read-only, in the container
// of the node wearing the mask — agent and tool alike — and absent from the
// next node's, even when both share a full-fidelity thread.
func TestMaskMountReachesOnlyItsNodesContainer(t *testing.T) {
	t.Parallel()
	f := newMaskFixture(t)
	grants, errs := mounts.MaskGrants(f.policy, f.masks)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	h := newHarness(t, func(c *Config) {
		c.MaskMounts = grants
		// The agent reports what its container holds.
		c.Agent = AgentConfig{Kind: "command", Command: `
			if [ -d /workspace/masks/recall/prior-rca ]; then echo "folder: $(cat /workspace/masks/recall/prior-rca/rca-1.md)"; else echo "folder: absent"; fi
			if touch /workspace/masks/recall/prior-rca/new 2>/dev/null; then echo "write: allowed"; else echo "write: refused"; fi
			echo "skills: $(ls "$HOME/.claude/skills" | tr '\n' ' ')"
			echo "[outcome:success]"`}
	})
	src := []byte(`digraph masked {
		graph [default_fidelity="full", thread_id="main"]
		start   [shape=Mdiamond]
		recall  [prompt="Recall", masks="recall"]
		next    [prompt="Next"]
		probe   [shape=parallelogram, masks="recall", tool_command="cat /workspace/masks/recall/prior-rca/rca-1.md && ! touch /workspace/masks/recall/prior-rca/y 2>/dev/null"]
		probe2  [shape=parallelogram, tool_command="test ! -e /workspace/masks"]
		done    [shape=Msquare]
		start -> recall -> next -> probe
		probe -> probe2 [condition="outcome=success"]
		probe2 -> done  [condition="outcome=success"]
	}`)
	g, diags, err := frontend.Prepare("masked.dot", src, frontend.Options{KnownTypes: engine.BuiltinTypes(), Masks: f.masks})
	if err != nil || pipeline.HasErrors(diags) {
		t.Fatalf("pipeline: %v %v", err, diags)
	}
	logs := t.TempDir()
	eng := engine.New(engine.Config{Backend: h.b, LogsRoot: logs, RunID: "run-masks", NoBackoff: true, Masks: f.masks})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := eng.Run(ctx, g, src, "masked.dot")
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != engine.StateSuccess || !slices.Equal(res.Path, []string{"start", "recall", "next", "probe", "probe2", "done"}) {
		t.Fatalf("run %s %v: %s\nlogs:\n%s", res.Status, res.Path, res.FailureReason, h.logs.String())
	}
	masked := readStage(t, logs, "recall", "response.md")
	for _, want := range []string{"folder: holdover timeout changed in 4f2a1c9", "write: refused", "skills: rca-search"} {
		if !strings.Contains(masked, want) {
			t.Errorf("the masked node's container: want %q in\n%s", want, masked)
		}
	}
	bare := readStage(t, logs, "next", "response.md")
	if !strings.Contains(bare, "folder: absent") || strings.Contains(bare, "rca-search") {
		t.Errorf("the next node's container still had the mask's grants:\n%s", bare)
	}
	if out := readStage(t, logs, "probe", "stdout.txt"); !strings.Contains(out, "holdover timeout") {
		t.Errorf("the masked tool did not read the folder: %q", out)
	}
	if _, err := os.Stat(filepath.Join(f.prior, "new")); err == nil {
		t.Error("an agent wrote into the mask's read-only folder")
	}
	// One thread, two containers: the unmasked node did not reuse the
	// masked node's live container.
	var reasons []string
	for _, e := range h.events.list(EventStopped) {
		if e.NodeID == "recall" {
			reasons = append(reasons, e.Reason)
		}
	}
	if !slices.Contains(reasons, "the next node wears other masks") {
		t.Errorf("the masked node's container was not closed for the next node: %v", reasons)
	}
}

func TestUnknownMaskIsRefusedByTheBackend(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	req := codergenReq("run-unknown-mask", "a", "compact")
	req.Masks = []string{"forge"}
	if _, err := h.run(req); err == nil || !strings.Contains(err.Error(), `wears mask "forge", which the container backend was not given`) {
		t.Errorf("err = %v", err)
	}
	if started := h.events.list(EventStarted); len(started) != 0 {
		t.Errorf("a container started without its mask's grants: %+v", started)
	}
}

func readStage(t *testing.T, logs, node, file string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(logs, node, file))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
