package container

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"nanohost/internal/container/containertest"
	"nanohost/internal/container/protocol"
	"nanohost/internal/mounts"
	"nanohost/internal/pipeline/engine"
)

// A warm pod may only be claimed by a container whose own pod would have
// been the same: same image, command, limits, user and volumes. Two runs
// of one group share a shape; another workspace, image, group or limit
// does not.
func TestWarmPodShapeSeparatesWhatAClaimCouldLeak(t *testing.T) {
	k, _ := fakeKube(t, nil)
	ws := t.TempDir()
	b, err := NewBackend(Config{Runtime: k, HostID: "h1", StateDir: t.TempDir(), Workspace: ws, Image: "img:1",
		Agent: AgentConfig{Kind: "script", ScriptFile: writeScript(t, `{"default": "ok"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	shapeOf := func(run string, env RunEnv, mutate func(*Spec)) string {
		t.Helper()
		req := engine.Request{Kind: engine.KindCodergen, RunID: run, NodeID: "n-" + run, Fidelity: "compact"}
		b.bind(run, env)
		env, err := b.runEnv(run)
		if err != nil {
			t.Fatal(err)
		}
		spec, err := b.agentSpec(req, env, containerName(run, req.NodeID), "", 1000, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := streamSpec(&spec, &protocol.Request{Nonce: "n"}); err != nil {
			t.Fatal(err)
		}
		if mutate != nil {
			mutate(&spec)
		}
		pod, err := k.podFor(spec)
		if err != nil {
			t.Fatal(err)
		}
		return podShape(pod)
	}
	base := shapeOf("run-a", RunEnv{Group: "main", Workspace: ws}, nil)
	if got := shapeOf("run-b", RunEnv{Group: "main", Workspace: ws}, nil); got != base {
		t.Error("two runs of one group in one workspace should share a shape (their pods differ only in name and run labels)")
	}
	other := t.TempDir()
	for what, shape := range map[string]string{
		"another workspace": shapeOf("run-c", RunEnv{Group: "main", Workspace: other}, nil),
		"another group":     shapeOf("run-d", RunEnv{Group: "ops", Workspace: ws}, nil),
		"an extra mount": shapeOf("run-e", RunEnv{Group: "main", Workspace: ws,
			ExtraMounts: []mounts.Mount{{Source: other, Target: "/workspace/extra", ReadOnly: true}}}, nil),
		"another image":   shapeOf("run-f", RunEnv{Group: "main", Workspace: ws}, func(s *Spec) { s.Image = "img:2" }),
		"another limit":   shapeOf("run-g", RunEnv{Group: "main", Workspace: ws}, func(s *Spec) { s.Limits.MemoryBytes = 1 << 30 }),
		"another user":    shapeOf("run-h", RunEnv{Group: "main", Workspace: ws}, func(s *Spec) { s.User = "1001:1001" }),
		"another command": shapeOf("run-i", RunEnv{Group: "main", Workspace: ws}, func(s *Spec) { s.Cmd = append(s.Cmd, "--watch", "poll") }),
	} {
		if shape == base {
			t.Errorf("%s has the same shape: a warm pod of one would be claimed by the other", what)
		}
	}
}

// A warm pod copies the pod it was made for but none of its run's labels,
// keeps every hardening setting, and holds no secret (the secrets travel
// in the first request of its claimer).
func TestWarmPodCopiesTheShapeButNotTheRun(t *testing.T) {
	k, _ := fakeKube(t, nil)
	spec := agentPodSpec(t, k)
	pod, err := k.podFor(spec)
	if err != nil {
		t.Fatal(err)
	}
	w := warmCopy(pod)
	if w.Name == pod.Name || !strings.HasPrefix(w.Name, "nanohost-warm-") {
		t.Errorf("warm pod name %q: want a name of its own", w.Name)
	}
	if podShape(w) != podShape(pod) {
		t.Error("the warm pod's shape differs from the pod it copies: it would never be claimed")
	}
	for _, l := range []string{LabelRun, LabelNode, LabelThread} {
		if _, ok := w.Labels[l]; ok {
			t.Errorf("the warm pod carries %s=%q of the run that made it", l, w.Labels[l])
		}
		if _, ok := podLabels(w)[l]; ok {
			t.Errorf("the warm pod's exact labels carry %s", l)
		}
	}
	if w.Labels[LabelWarm] != "true" || w.Labels[LabelHost] != "h1" || w.Labels[LabelOwner] != pod.Labels[LabelOwner] {
		t.Errorf("labels %v: want %s, and the host and owner (orphans are found by them)", w.Labels, LabelWarm)
	}
	for _, p := range containertest.PodHardeningProblems(w) {
		t.Error(p)
	}
	yml, _ := yaml.Marshal(w)
	if strings.Contains(string(yml), "sk-very-secret-value") {
		t.Error("the secret is in the warm pod")
	}
}
