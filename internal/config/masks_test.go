package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nanohost/internal/mounts"
	"nanohost/internal/pipeline/mask"
)

func loadYAML(t *testing.T, src string) *Config {
	t.Helper()
	path := filepath.Join(t.TempDir(), "nanohost.yaml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestMasksFromTheConfigFile(t *testing.T) {
	home, _ := mountsFixture(t)
	c := loadYAML(t, `
data_dir: `+filepath.Join(home, "nano", "data")+`
runtime:
  mount_allowlist: `+filepath.Join(home, "allow.json")+`
masks:
  recall:
    title: Mask of Recall
    nodes: [recall]
    mounts: ["~/src/shared-lib:prior-rca"]
    context: {prior_rca_available: true}
    preamble: Consult the prior analyses first.
  judgment:
    classes: [review]
`)
	set := c.MaskSet()
	if got := set.Names(); len(got) != 2 || set["recall"].Context["prior_rca_available"] != "true" || set["judgment"].Name != "judgment" {
		t.Fatalf("masks = %v %+v", got, set["recall"])
	}
	grants, ps := c.MaskMounts()
	if len(ps) > 0 {
		t.Fatalf("problems: %v", ps)
	}
	want := mounts.Mount{Source: filepath.Join(home, "src", "shared-lib"), Target: "/workspace/masks/recall/prior-rca", ReadOnly: true}
	if len(grants["recall"]) != 1 || grants["recall"][0] != want || len(grants["judgment"]) != 0 {
		t.Errorf("grants = %+v", grants)
	}
	for _, p := range c.Check() {
		if strings.HasPrefix(p.Field, "masks") {
			t.Errorf("config check: %v", p)
		}
	}
}

// config check names each broken mask field and says what to write.
func TestConfigCheckExplainsBadMasks(t *testing.T) {
	_, c := mountsFixture(t)
	c.Masks = map[string]mask.Mask{
		"nowhere": {Title: "Valid for nothing"},
		"rw":      {Nodes: []string{"a"}, Mounts: []string{"~/src:rw"}},
		"ctx":     {Nodes: []string{"a"}, Context: map[string]string{"outcome": "success"}},
	}
	ps := c.Check()
	want := map[string]string{
		"masks.nowhere.nodes": "nodes: [recall]",
		"masks.rw.mounts[0]":  "read-only",
		"masks.ctx.context":   "choose another name",
	}
	for field, fix := range want {
		found := false
		for _, p := range ps {
			if p.Field == field && p.Blocking && strings.Contains(p.Message+p.Fix, fix) {
				found = true
			}
		}
		if !found {
			t.Errorf("no blocking problem on %s mentioning %q in %v", field, fix, ps)
		}
	}

	// A well-formed mask whose folder the allowlist refuses.
	c.Masks = map[string]mask.Mask{"keys": {Nodes: []string{"a"}, Mounts: []string{"~/.ssh:keys"}}, "gone": {Nodes: []string{"a"}, Skills: []string{"~/src/nope"}}}
	_, ps = c.MaskMounts()
	if len(ps) != 2 {
		t.Fatalf("problems = %v", ps)
	}
	for _, p := range ps {
		switch p.Field {
		case "masks.keys.mounts[0]":
			if !strings.Contains(p.Message, `blocked pattern ".ssh"`) || !strings.Contains(p.Fix, "allowed_roots") {
				t.Errorf("%v", p)
			}
		case "masks.gone.skills[0]":
			if !strings.Contains(p.Message, "no such file") {
				t.Errorf("%v", p)
			}
		default:
			t.Errorf("unexpected %v", p)
		}
	}
	if !Blocking(c.Check()) {
		t.Error("the host would start with a mask it cannot grant")
	}
}
