package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nanohost/internal/mounts"
)

// mountsFixture is a home with ~/src/shared-lib, ~/.ssh and ~/other, an
// allowlist (outside data_dir) allowing ~/src read-only, and a config
// whose data_dir is ~/nano/data.
func mountsFixture(t *testing.T) (home string, c *Config) {
	t.Helper()
	home = t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	for _, d := range []string{"src/shared-lib", ".ssh", "other", "nano/data/groups/team"} {
		if err := os.MkdirAll(filepath.Join(home, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	allow := filepath.Join(home, "allow.json")
	if err := os.WriteFile(allow, []byte(`{"allowed_roots": [{"path": "~/src"}, {"path": "~/nano"}, {"path": "~"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	c = Defaults()
	c.DataDir = filepath.Join(home, "nano", "data")
	c.Runtime.MountAllowlist = allow
	return home, c
}

func TestGroupMountsAllowedByTheAllowlist(t *testing.T) {
	home, c := mountsFixture(t)
	c.Groups = []Group{
		{Folder: "team", Chat: "console:main", Mounts: []string{"~/src/shared-lib:/workspace/extra/shared-lib:ro", "~/src:code"}},
		{Folder: "other", Chat: "console:other"},
	}
	byGroup, ps := c.GroupMounts()
	if len(ps) > 0 {
		t.Fatalf("problems: %v", ps)
	}
	want := []mounts.Mount{
		{Source: filepath.Join(home, "src", "shared-lib"), Target: "/workspace/extra/shared-lib", ReadOnly: true},
		{Source: filepath.Join(home, "src"), Target: "/workspace/extra/code", ReadOnly: true},
	}
	got := byGroup["team"]
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("team's mounts = %+v, want %+v", got, want)
	}
	if len(byGroup["other"]) != 0 {
		t.Errorf("a group without mounts got %+v", byGroup["other"])
	}
}

// Every refusal blocks start-up and names the group, the mount and the rule.
func TestGroupMountsRefused(t *testing.T) {
	_, c := mountsFixture(t)
	for _, tc := range []struct {
		name, mount string
		want        []string
	}{
		{"credentials", "~/.ssh", []string{"group team", `"~/.ssh"`, `blocked pattern ".ssh"`}},
		{"read-write on a read-only root", "~/src/shared-lib:rw", []string{"group team", "allowed read-only"}},
		{"inside data_dir", "~/nano/data/groups/team:peek", []string{"group team", "overlaps data_dir"}},
		{"bad syntax", "~/src:a:b:ro", []string{"group team", "HOST[:NAME][:ro|rw]"}},
		{"missing", "~/src/nope", []string{"group team", "no such file"}},
		{"twice", "~/src/shared-lib,~/other:shared-lib", []string{"already mounted"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.Groups = []Group{{Folder: "team", Chat: "console:main", Mounts: strings.Split(tc.mount, ",")}}
			_, ps := c.GroupMounts()
			if len(ps) != 1 || !ps[0].Blocking || !strings.HasPrefix(ps[0].Field, "groups[0].mounts[") {
				t.Fatalf("problems = %v, want one blocking problem on the mount", ps)
			}
			for _, w := range tc.want {
				if !strings.Contains(ps[0].Message, w) {
					t.Errorf("problem %q lacks %q", ps[0].Message, w)
				}
			}
			if !Blocking(c.Check()) {
				t.Errorf("config check lets the host start with %s", tc.mount)
			}
		})
	}
}

// Without an allowlist file (the default path, absent) no extra mount is
// allowed, and the fix says how to create one.
func TestGroupMountsWithoutAnAllowlist(t *testing.T) {
	home, c := mountsFixture(t)
	c.Runtime.MountAllowlist = ""
	c.Groups = []Group{{Folder: "team", Chat: "console:main", Mounts: []string{"~/src/shared-lib"}}}
	_, ps := c.GroupMounts()
	def := filepath.Join(home, ".config", "nanohost", "mount-allowlist.json")
	if len(ps) != 1 || !strings.Contains(ps[0].Message, "not under an allowed root") || !strings.Contains(ps[0].Fix, "create "+def) {
		t.Fatalf("problems = %v, want the mount refused with a fix creating %s", ps, def)
	}
}
