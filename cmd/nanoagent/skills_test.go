package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nanohost/internal/container/protocol"
)

// repoSkills is the repository's skills/ directory, which the host mounts
// at /workspace/skills.
var repoSkills = filepath.Join("..", "..", "skills")

// The agent the runner starts finds the host's skills where Claude Code
// looks for them: $HOME/.claude/skills/<name>/SKILL.md.
func TestRunnerInstallsTheHostSkillsWhereClaudeCodeFindsThem(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("NANOAGENT_SKILLS_DIR", repoSkills)
	ipc := t.TempDir()
	for _, d := range []string{"input", "outcome"} {
		if err := os.Mkdir(filepath.Join(ipc, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	req := protocol.Request{Version: protocol.Version, DispatchID: 1, NodeID: "a", Prompt: "x", Once: true, Nonce: protocol.NewNonce()}
	data, _ := json.Marshal(req)
	var out, errOut bytes.Buffer
	code := runMain([]string{"run", "--ipc-dir", ipc, "--workdir", t.TempDir(), "--agent", "command",
		"--command", `head -n 2 "$HOME/.claude/skills/attractor/SKILL.md"; ls "$HOME/.claude/skills/attractor/workflows"`},
		bytes.NewReader(data), &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	res, err := protocol.NewScanner(&out, req.Nonce).Next()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Result, "name: attractor") || !strings.Contains(res.Result, "bug-fix.dot") {
		t.Fatalf("the agent did not find the attractor skill and its workflows in ~/.claude/skills:\n%s\n%s", res.Result, errOut.String())
	}
}

func TestInstallSkillsReplacesOldCopiesAndKeepsOtherSkills(t *testing.T) {
	dst := filepath.Join(t.TempDir(), ".claude", "skills")
	// A copy from an older host, and a skill of the agent's own.
	for _, f := range []string{"attractor/SKILL.md", "attractor/workflows/removed.dot", "mine/SKILL.md"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, f), []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := installSkills(repoSkills, dst); err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(filepath.Join(repoSkills, "attractor", "SKILL.md"))
	if got, _ := os.ReadFile(filepath.Join(dst, "attractor", "SKILL.md")); !bytes.Equal(got, want) {
		t.Error("SKILL.md is not the host's current one")
	}
	if _, err := os.Stat(filepath.Join(dst, "attractor", "workflows", "removed.dot")); err == nil {
		t.Error("a file the host no longer ships survived the update")
	}
	if got, _ := os.ReadFile(filepath.Join(dst, "mine", "SKILL.md")); string(got) != "old" {
		t.Error("the agent's own skill was touched")
	}
	entries, _ := os.ReadDir(dst)
	for _, e := range entries {
		if e.Name() != "attractor" && e.Name() != "mine" {
			t.Errorf("unexpected %s in the skills directory (a leftover temp dir, or a file that is not a skill)", e.Name())
		}
	}
}

func TestInstallSkillsWithoutMountedSkillsDoesNothing(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "skills")
	if err := installSkills(filepath.Join(t.TempDir(), "absent"), dst); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dst); err == nil {
		t.Error("a skills directory was created with no skills to put in it")
	}
}

// A mask's skill is installed for the node wearing the mask and taken off
// by the next container that shares ~/.claude, whatever it wears.
func TestMaskSkillsAreInstalledForTheirNodeOnly(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("NANOAGENT_SKILLS_DIR", repoSkills)
	masks := t.TempDir()
	t.Setenv("NANOAGENT_MASK_SKILLS_DIR", masks)
	for _, f := range []string{"recall/rca-search/SKILL.md", "recall/rca-search/queries.md", "recall/notaskill/readme.md"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(masks, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(masks, f), []byte("---\nname: rca-search\n---\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	skills := filepath.Join(home, ".claude", "skills")
	var stderr bytes.Buffer
	installHostSkills(&stderr)
	for _, f := range []string{"attractor/SKILL.md", "rca-search/SKILL.md", "rca-search/queries.md"} {
		if _, err := os.Stat(filepath.Join(skills, f)); err != nil {
			t.Errorf("%s not installed: %v (%s)", f, err, stderr.String())
		}
	}
	if _, err := os.Stat(filepath.Join(skills, "notaskill")); err == nil {
		t.Error("a folder without SKILL.md was installed as a skill")
	}

	// The next node wears no mask: same ~/.claude, nothing mounted.
	t.Setenv("NANOAGENT_MASK_SKILLS_DIR", filepath.Join(t.TempDir(), "absent"))
	installHostSkills(&stderr)
	if _, err := os.Stat(filepath.Join(skills, "rca-search")); err == nil {
		t.Error("the mask's skill outlived its node")
	}
	if _, err := os.Stat(filepath.Join(skills, "attractor", "SKILL.md")); err != nil {
		t.Errorf("the host's skill went with it: %v", err)
	}
	if stderr.Len() > 0 {
		t.Errorf("stderr: %s", stderr.String())
	}
}
