package persona

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestBuiltinsAreTheFrameworksEight(t *testing.T) {
	c := Builtin()
	want := []string{"abyss", "bulwark", "challenger", "herald", "seeker", "sentinel", "specter", "weaver"}
	if got := c.Names(); !slices.Equal(got, want) {
		t.Fatalf("built-in personas = %v, want %v", got, want)
	}
	light, shadow := 0, 0
	for _, name := range want {
		p, _ := c.Lookup(name)
		if p.Preamble == "" || p.Description == "" || p.Title == "" || p.Source != "built-in" {
			t.Errorf("%s is incomplete: %+v", name, p)
		}
		if !strings.Contains(p.Preamble, "You are the "+p.Title) {
			t.Errorf("%s's preamble does not say who the agent is: %q", name, p.Preamble)
		}
		if err := p.check(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		switch p.Alignment {
		case "light":
			light++
		case "shadow":
			shadow++
		}
	}
	if light != 4 || shadow != 4 {
		t.Errorf("%d light and %d shadow personas, want 4 and 4", light, shadow)
	}
	// Lookup takes what a node wrote, in any case.
	if p, ok := c.Lookup(" Seeker "); !ok || p.Name != "seeker" {
		t.Errorf("Lookup(\" Seeker \") = %v, %v", p, ok)
	}
	if p, _ := c.Lookup("weaver"); p.Defaults()["fidelity"] != "summary:high" || p.Defaults()["reasoning_effort"] != "medium" {
		t.Errorf("weaver defaults = %v", p.Defaults())
	}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCustomPersonaOverridesABuiltin(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "seeker.md", "---\ntitle: House Seeker\nllm_model: claude-opus-4-6\nmax_retries: 2\n---\nYou are our own Seeker. Cite the runbook.\n")
	writeFile(t, dir, "triager.md", "Sort the failure in one pass.\r\n")
	writeFile(t, dir, "notes.txt", "not a persona")
	c, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := c.Lookup("seeker")
	if p.Title != "House Seeker" || p.Preamble != "You are our own Seeker. Cite the runbook." || p.Source != filepath.Join(dir, "seeker.md") {
		t.Errorf("seeker = %+v", p)
	}
	if d := p.Defaults(); d["llm_model"] != "claude-opus-4-6" || d["max_retries"] != "2" || len(d) != 2 {
		t.Errorf("seeker defaults = %v", d)
	}
	if p, ok := c.Lookup("triager"); !ok || p.Title != "Triager" || p.Preamble != "Sort the failure in one pass." {
		t.Errorf("triager = %+v", p)
	}
	if c.Len() != 9 {
		t.Errorf("catalogue has %d personas, want the 8 built-ins plus triager", c.Len())
	}
	// The shared built-in catalogue is untouched.
	if b, _ := Builtin().Lookup("seeker"); b.Source != "built-in" {
		t.Errorf("the built-in seeker was replaced: %+v", b)
	}
}

func TestBadPersonaFilesNameTheFileAndTheFix(t *testing.T) {
	cases := map[string]struct{ content, want string }{
		"effort.md":   {"---\nreasoning_effort: extreme\n---\nYou are X.", "reasoning_effort \"extreme\": use low, medium or high"},
		"fidelity.md": {"---\nfidelity: everything\n---\nYou are X.", "fidelity"},
		"unknown.md":  {"---\nmodel: x\n---\nYou are X.", "keys: name, title"},
		"empty.md":    {"---\ntitle: Empty\n---\n", "no preamble"},
		"open.md":     {"---\ntitle: Open\nYou are X.", "never closed"},
		"Bad Name.md": {"You are X.", "use lower-case letters"},
		"retries.md":  {"---\nmax_retries: -1\n---\nYou are X.", "max_retries -1"},
	}
	for file, tc := range cases {
		t.Run(file, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, dir, file, tc.content)
			_, err := Load(dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), file) {
				t.Errorf("err = %v, want it to name %s and say %q", err, file, tc.want)
			}
		})
	}
	t.Run("duplicate", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, dir, "a.md", "---\nname: twin\n---\nOne.")
		writeFile(t, dir, "b.md", "---\nname: twin\n---\nTwo.")
		if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "already defines persona \"twin\"") {
			t.Errorf("err = %v", err)
		}
	})
}

// The personas folder of a group is one its agents can write to: a link
// must never carry a host file into a prompt.
func TestLoadDirRefusesLinksAndHugeFiles(t *testing.T) {
	secret := writeFile(t, t.TempDir(), "secret.txt", "host secret")
	dir := t.TempDir()
	if err := os.Symlink(secret, filepath.Join(dir, "leak.md")); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("linked file: err = %v", err)
	}

	linked := filepath.Join(t.TempDir(), "personas")
	if err := os.Symlink(t.TempDir(), linked); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(linked); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("linked folder: err = %v", err)
	}

	big := t.TempDir()
	writeFile(t, big, "big.md", strings.Repeat("x", MaxFileBytes+1))
	if _, err := Load(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("big file: err = %v", err)
	}

	if c, err := Load(filepath.Join(t.TempDir(), "missing")); err != nil || c.Len() != 8 {
		t.Errorf("missing folder: %v, %d personas", err, c.Len())
	}
}

// TestCustomPersonaTraitsAreValidatedWithAFix: a persona file may declare
// its element, position, home zone, stickiness and step affinities; each
// mistake is refused with what to write instead.
func TestCustomPersonaTraitsAreValidatedWithAFix(t *testing.T) {
	good := "---\nelement: Water\nposition: c\nzone: frontcourt\nstickiness: 2\naffinity: {triage: 0.9, Investigate: 1, report: 0}\n---\nYou dig."
	p, err := Parse("digger.md", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if p.Element != "water" || p.Position != "C" || p.HomeZone() != "frontcourt" || p.Stickiness != 2 ||
		p.Affinity["triage"] != 0.9 || p.Affinity["investigate"] != 1 || len(p.Affinity) != 3 {
		t.Errorf("parsed %+v", p)
	}
	if tr, ok := p.Traits(0, false); !ok || tr.MaxLoops != 3 {
		t.Errorf("a water persona's traits = %+v", tr)
	}
	for _, tc := range []struct{ head, want string }{
		{"element: mud", `element "mud": use one of fire, lightning, earth, diamond, water, air, iron`},
		{"position: QB", `position "QB": use PG`},
		{"zone: front court", `zone "front court": name the home zone`},
		{"stickiness: 5", "stickiness 5: use a whole number from 0 (moves freely) to 3"},
		{"stickiness: high", "stickiness high: use a whole number from 0"},
		{"affinity: 0.9", "affinity: write a map of step to a number from 0 to 1, such as affinity: {triage: 0.9"},
		{"affinity: {triage: 1.5}", "affinity.triage 1.5: use a number from 0 (no use at this step) to 1"},
		{"affinity: {triage: often}", "affinity.triage often: use a number from 0"},
		{`affinity: {"re view": 0.5}`, `affinity step "re view": name a step as nodes do`},
		{"elemnt: water", "field elemnt not found"},
	} {
		_, err := Parse("bad.md", []byte("---\n"+tc.head+"\n---\nYou are bad."))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "persona bad.md") {
			t.Errorf("%s: err = %v, want it to name the file and say %q", tc.head, err, tc.want)
		}
	}
}
