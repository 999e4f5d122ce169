package mounts

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeAllowlist(t *testing.T, dir, body string) string {
	t.Helper()
	path := filepath.Join(dir, "mount-allowlist.json")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestMountPolicy(t *testing.T) {
	base := t.TempDir()
	projects := filepath.Join(base, "projects")
	for _, d := range []string{"projects/app", "projects/app/.ssh", "projects/creds/credentials.d", "projects/private-stuff-x", "elsewhere", "config"} {
		os.MkdirAll(filepath.Join(base, d), 0o755)
	}
	os.Symlink(filepath.Join(projects, "app", ".ssh"), filepath.Join(projects, "innocent-link"))
	list := writeAllowlist(t, filepath.Join(base, "config"), `{"allowed_roots": [{"path": "`+projects+`", "read_write": false}],
		"blocked_patterns": ["private-stuff"]}`)
	p, err := LoadPolicy(list)
	if err != nil {
		t.Fatal(err)
	}

	m, err := p.Validate(Request{HostPath: filepath.Join(projects, "app"), ReadOnly: true})
	if err != nil || m.Target != "/workspace/extra/app" || !m.ReadOnly {
		t.Errorf("allowed read-only mount: %+v, %v", m, err)
	}
	for name, tc := range map[string]struct {
		req  Request
		want string
	}{
		"outside every root":  {Request{HostPath: filepath.Join(base, "elsewhere"), ReadOnly: true}, "not under an allowed root"},
		"read-write denied":   {Request{HostPath: filepath.Join(projects, "app")}, "allowed read-only"},
		"blocked .ssh":        {Request{HostPath: filepath.Join(projects, "app", ".ssh"), ReadOnly: true}, `".ssh"`},
		"blocked credentials": {Request{HostPath: filepath.Join(projects, "creds", "credentials.d"), ReadOnly: true}, `"credentials"`},
		"symlink to .ssh":     {Request{HostPath: filepath.Join(projects, "innocent-link"), ReadOnly: true}, `".ssh"`},
		"custom pattern":      {Request{HostPath: filepath.Join(projects, "private-stuff-x"), ReadOnly: true}, `"private-stuff"`},
		"missing directory":   {Request{HostPath: filepath.Join(projects, "nope"), ReadOnly: true}, "no such file"},
		"bad name":            {Request{HostPath: filepath.Join(projects, "app"), Name: "../etc", ReadOnly: true}, "mount name"},
		"holds the allowlist": {Request{HostPath: base, ReadOnly: true}, "contains the mount allowlist"},
	} {
		if _, err := p.Validate(tc.req); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %s", name, err, tc.want)
		}
	}
}

func TestMissingAllowlistAllowsNoExtraMounts(t *testing.T) {
	p, err := LoadPolicy(filepath.Join(t.TempDir(), "absent.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Validate(Request{HostPath: t.TempDir(), ReadOnly: true}); err == nil || !strings.Contains(err.Error(), "allowed_roots") {
		t.Errorf("got %v; want a refusal that says where to allow it", err)
	}
}

func TestBadAllowlistSaysWhatToWrite(t *testing.T) {
	_, err := LoadPolicy(writeAllowlist(t, t.TempDir(), `{"roots": ["/src"]}`))
	if err == nil || !strings.Contains(err.Error(), "allowed_roots") {
		t.Errorf("got %v", err)
	}
}

func TestCheckWorkspace(t *testing.T) {
	p, _ := LoadPolicy("")
	ws := t.TempDir()
	if err := p.CheckWorkspace(ws, t.TempDir()); err != nil {
		t.Errorf("a plain project directory was refused: %v", err)
	}
	if err := p.CheckWorkspace("/"); err == nil {
		t.Error("the root directory was accepted as a workspace")
	}
	if home, err := os.UserHomeDir(); err == nil {
		if err := p.CheckWorkspace(home); err == nil {
			t.Error("the home directory was accepted as a workspace")
		}
	}
	if err := p.CheckWorkspace(ws, filepath.Join(ws, "state")); err == nil || !strings.Contains(err.Error(), "inside the workspace") {
		t.Errorf("state inside the workspace: %v", err)
	}
	aws := filepath.Join(ws, ".aws")
	os.Mkdir(aws, 0o700)
	if err := p.CheckWorkspace(aws); err == nil {
		t.Error("a credentials directory was accepted as a workspace")
	}
}

func TestParseMountFlag(t *testing.T) {
	for in, want := range map[string]Request{
		"/src/app":         {HostPath: "/src/app", ReadOnly: true},
		"/src/app:rw":      {HostPath: "/src/app"},
		"/src/app:code":    {HostPath: "/src/app", Name: "code", ReadOnly: true},
		"/src/app:code:rw": {HostPath: "/src/app", Name: "code"},
	} {
		got, err := ParseFlag(in)
		if err != nil || got != want {
			t.Errorf("ParseFlag(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	if _, err := ParseFlag("/a:b:c:rw"); err == nil {
		t.Error("too many fields accepted")
	}
}
