package host

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"nanohost/internal/channels/console"
	"nanohost/internal/config"
	"nanohost/internal/mounts"
	"nanohost/internal/store"
	"nanohost/internal/store/storetest"
)

// newMountsHost makes (without running) a host whose group "team" asks for
// mounts, with an allowlist that allows <dir>/src read-only.
func newMountsHost(t *testing.T, mounts ...string) (*Host, string, error) {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("HOME", dir)
	for _, d := range []string{"src/lib", "src/.aws", "elsewhere"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	allow := filepath.Join(dir, "allow.json")
	if err := os.WriteFile(allow, []byte(`{"allowed_roots": [{"path": "`+filepath.Join(dir, "src")+`"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := config.Defaults()
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.Runtime.MountAllowlist = allow
	cfg.Groups = []config.Group{
		{Folder: "main", Chat: "console:main", Main: true},
		{Folder: "team", Chat: "console:team", Mounts: mounts},
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(context.Background(), storetest.URL(t, cfg.DataDir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h, err := New(Options{
		Config: cfg, Store: st, Agents: &fakeAgents{answer: succeed}, Logger: quiet,
		Endpoints: []Endpoint{{Channel: console.New(strings.NewReader(""), &strings.Builder{}), Policy: console.Policy()}},
	})
	return h, dir, err
}

// The team's containers (chat, pipeline agents and tools alike work in
// the group's agentEnv) get its allowed extra mount besides the IPC
// queues; other groups do not.
func TestGroupContainersGetTheirAllowedExtraMounts(t *testing.T) {
	h, dir, err := newMountsHost(t, "~/src/lib:/workspace/extra/lib:ro")
	if err != nil {
		t.Fatal(err)
	}
	want := mounts.Mount{Source: filepath.Join(dir, "src", "lib"), Target: "/workspace/extra/lib", ReadOnly: true}
	team := h.env.of("team")
	if !slices.Contains(team.ExtraMounts, want) {
		t.Errorf("team's mounts %+v lack %+v", team.ExtraMounts, want)
	}
	if team.GroupIPC != filepath.Join(h.IPCRoot(), "team") || team.Workspace != h.GroupDir("team") {
		t.Errorf("team's env %+v: want its own IPC directory and workspace", team)
	}
	if main := h.env.of("main"); len(main.ExtraMounts) != 0 {
		t.Errorf("main got another group's extra mount: %+v", main.ExtraMounts)
	}
}

// A mount the allowlist refuses stops the host from being made, with the
// group, the mount and the rule in the error.
func TestHostRefusesAGroupMountTheAllowlistRefuses(t *testing.T) {
	for _, tc := range []struct {
		mount string
		want  []string
	}{
		{"~/src/.aws", []string{"group team", `"~/src/.aws"`, `blocked pattern ".aws"`}},
		{"~/elsewhere", []string{"group team", `"~/elsewhere"`, "not under an allowed root", "allow.json"}},
	} {
		_, _, err := newMountsHost(t, tc.mount)
		if err == nil {
			t.Errorf("the host was made with the mount %s", tc.mount)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q lacks %q", err, w)
			}
		}
	}
}
