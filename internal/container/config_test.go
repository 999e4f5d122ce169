package container

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLimitsDefaultPerField(t *testing.T) {
	got := Limits{MemoryBytes: 1 << 30, Pids: -1}.withDefaults()
	want := Limits{MemoryBytes: 1 << 30, CPUs: DefaultLimits.CPUs, Pids: 0}
	if got != want {
		t.Errorf("withDefaults = %+v, want %+v (memory kept, CPUs defaulted, pids unlimited)", got, want)
	}
}

func TestContainerUserIsNeverRoot(t *testing.T) {
	if _, _, err := resolveUser("0:0", t.TempDir()); err == nil || !strings.Contains(err.Error(), "never run as root") {
		t.Errorf("root user accepted: %v", err)
	}
	if _, _, err := resolveUser("agent", t.TempDir()); err == nil {
		t.Error("a non-numeric user was accepted")
	}
	if uid, gid, err := resolveUser("1500", t.TempDir()); err != nil || uid != 1500 || gid != 1500 {
		t.Errorf("resolveUser(1500) = %d:%d, %v", uid, gid, err)
	}
	uid, _, err := resolveUser("", t.TempDir())
	if err != nil || uid == 0 {
		t.Errorf("default user %d (%v): want a non-root uid", uid, err)
	}
	if os.Geteuid() != 0 && uid != os.Geteuid() {
		t.Errorf("a non-root host should run agents as itself (%d), got %d", os.Geteuid(), uid)
	}
}

func TestConfigErrorsSayWhatIsMissing(t *testing.T) {
	for want, cfg := range map[string]Config{
		"no Runtime":         {},
		"no StateDir":        {Runtime: &Docker{}},
		"no HostID":          {Runtime: &Docker{}, StateDir: "/tmp/x"},
		"needs a ScriptFile": {Runtime: &Docker{}, StateDir: "/tmp/x", HostID: "h", Agent: AgentConfig{Kind: "script"}},
		"needs a Command":    {Runtime: &Docker{}, StateDir: "/tmp/x", HostID: "h", Agent: AgentConfig{Kind: "command"}},
		"unknown agent kind": {Runtime: &Docker{}, StateDir: "/tmp/x", HostID: "h", Agent: AgentConfig{Kind: "gpt"}},
	} {
		if _, err := NewBackend(cfg); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want an error containing %q", err, want)
		}
	}
}

func TestHostTimezone(t *testing.T) {
	etc := func(files map[string]string, link string) string {
		dir := t.TempDir()
		for name, content := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if link != "" {
			if err := os.Symlink(link, filepath.Join(dir, "localtime")); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	linked := etc(nil, "/usr/share/zoneinfo/America/Argentina/Buenos_Aires")
	for _, tc := range []struct{ env, etc, want string }{
		{"Asia/Tokyo", linked, "Asia/Tokyo"},
		{"CET-1CEST,M3.5.0,M10.5.0/3", linked, "CET-1CEST,M3.5.0,M10.5.0/3"},
		{":Europe/Paris", linked, "Europe/Paris"},
		{":/etc/localtime", linked, "America/Argentina/Buenos_Aires"}, // a host path: use the zone it names
		{"", linked, "America/Argentina/Buenos_Aires"},
		{"", etc(map[string]string{"timezone": "Europe/Berlin\n"}, "/usr/share/zoneinfo/UTC"), "Europe/Berlin"},
		{"", etc(nil, "/etc/some-file"), ""},
		{"", t.TempDir(), ""},
	} {
		if got := timezoneFrom(tc.env, tc.etc); got != tc.want {
			t.Errorf("TZ=%q, %s: got %q, want %q", tc.env, tc.etc, got, tc.want)
		}
	}
}
