package host

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"nanohost/internal/channels"
	"nanohost/internal/channels/console"
	"nanohost/internal/config"
	"nanohost/internal/container"
	"nanohost/internal/store"
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
	st, err := store.Open(context.Background(), cfg.DatabasePath())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h, err := New(Options{
		Config: cfg, Store: st, Backend: &fakeAgents{answer: succeed}, Logger: quiet,
		Channels: []channels.Channel{console.New(strings.NewReader(""), &strings.Builder{})},
	})
	return h, dir, err
}

// The team's containers (chat, pipeline agents and tools alike are bound
// with groupMounts) get its allowed extra mount after the IPC queues;
// other groups do not.
func TestGroupContainersGetTheirAllowedExtraMounts(t *testing.T) {
	h, dir, err := newMountsHost(t, "~/src/lib:/workspace/extra/lib:ro")
	if err != nil {
		t.Fatal(err)
	}
	want := container.Mount{Source: filepath.Join(dir, "src", "lib"), Target: "/workspace/extra/lib", ReadOnly: true}
	team := h.groupMounts("team")
	if !slices.Contains(team, want) {
		t.Errorf("team's mounts %+v lack %+v", team, want)
	}
	if !slices.ContainsFunc(team, func(m container.Mount) bool { return strings.HasSuffix(m.Target, "/tasks") }) {
		t.Errorf("team's mounts %+v lost the IPC queues", team)
	}
	if main := h.groupMounts("main"); slices.ContainsFunc(main, func(m container.Mount) bool { return strings.HasPrefix(m.Target, container.ExtraMountRoot) }) {
		t.Errorf("main got another group's extra mount: %+v", main)
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
