package mask

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"nanohost/internal/pipeline"
)

const lightMasks = `masks:
  recall:
    title: Mask of Recall
    nodes: [recall]
    mounts: ["~/rca-db:prior-rca", "/srv/history"]
    context: {prior_rca_available: true}
    preamble: Consult the prior analyses before you classify.
  judgment:
    title: Mask of Judgment
    classes: [review]
    skills: [/opt/skills/verdicts]
    context: {review_authority: "true"}
  anywhere:
    nodes: ["*"]
`

func TestParseMasksFile(t *testing.T) {
	s, err := Parse("light.yaml", []byte(lightMasks))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Names(); !slices.Equal(got, []string{"anywhere", "judgment", "recall"}) {
		t.Fatalf("names = %v", got)
	}
	recall, _ := s.Lookup(" Recall ")
	if recall.Name != "recall" || recall.DisplayName() != "Mask of Recall" || recall.Context["prior_rca_available"] != "true" {
		t.Errorf("recall = %+v", recall)
	}
	var targets []string
	for _, spec := range recall.Mounts {
		m, err := recall.ParseMount(spec)
		if err != nil {
			t.Fatal(err)
		}
		targets = append(targets, m.Target)
	}
	if !slices.Equal(targets, []string{"/workspace/masks/recall/prior-rca", "/workspace/masks/recall/history"}) {
		t.Errorf("mount targets = %v", targets)
	}
	judgment, _ := s.Lookup("judgment")
	if got := judgment.SkillTarget(judgment.Skills[0]); got != "/workspace/mask-skills/judgment/verdicts" {
		t.Errorf("skill target = %s", got)
	}

	review := &pipeline.Node{ID: "f5", Classes: []string{"review"}}
	other := &pipeline.Node{ID: "report"}
	if !judgment.ValidFor(review) || judgment.ValidFor(other) || !recall.ValidFor(&pipeline.Node{ID: "recall"}) {
		t.Error("ValidFor does not follow nodes and classes")
	}
	any, _ := s.Lookup("anywhere")
	if !any.ValidFor(other) {
		t.Error(`nodes: ["*"] is valid for every node`)
	}
}

func TestResolveKeepsEquipOrder(t *testing.T) {
	s, _ := Parse("light.yaml", []byte(lightMasks))
	n := &pipeline.Node{ID: "recall", Attrs: pipeline.Attrs{"masks": "anywhere, Recall"}}
	ms, err := s.Resolve(n)
	if err != nil || len(ms) != 2 || ms[0].Name != "anywhere" || ms[1].Name != "recall" {
		t.Fatalf("Resolve = %v, %v", ms, err)
	}
	n.Attrs["masks"] = "judgment"
	if _, err := s.Resolve(n); err == nil || !strings.Contains(err.Error(), "valid only for classes review") {
		t.Errorf("invalid node: %v", err)
	}
	n.Attrs["masks"] = "forge"
	if _, err := s.Resolve(n); err == nil || !strings.Contains(err.Error(), "not defined") {
		t.Errorf("unknown mask: %v", err)
	}
	if got := List(" a, ,B "); !slices.Equal(got, []string{"a", "", "b"}) {
		t.Errorf("List = %q", got)
	}
}

func TestBadMasksSayWhatToFix(t *testing.T) {
	cases := map[string]string{
		"masks:\n  x:\n    title: X\n":                                    "valid for no node",
		"masks:\n  X:\n    nodes: [a]\n":                                  `name "X"`,
		"masks:\n  x:\n    nodes: [a]\n    mounts: [\"/srv/db:rw\"]\n":    "read-only",
		"masks:\n  x:\n    nodes: [a]\n    mounts: [/a/db, /b/db]\n":      `second folder named "db"`,
		"masks:\n  x:\n    nodes: [a]\n    mounts: [\"/a:.hidden\"]\n":    "not starting with '.'",
		"masks:\n  x:\n    nodes: [a]\n    context: {outcome: success}\n": "belongs to the engine",
		"masks:\n  x:\n    nodes: [a]\n    context: {\"a b\": c}\n":       "context key",
		"masks:\n  x:\n    nodes: [a]\n    preamble: \"one\\ntwo\"\n":     "more than one line",
		"masks:\n  x:\n    nodes: [a]\n    mount: [/srv]\n":               "keys of a mask",
		"masks:\n  x:\n    nodes: [a]\n    skills: [/a/s, /b/s]\n":        `second skill folder named "s"`,
		"other: 1\n":  "not found",
		"masks: {}\n": "no masks defined",
		"masks:\n  x:\n    nodes: [a]\n    context: {internal.visit_count.a: 1}\n": "belongs to the engine",
	}
	for src, want := range cases {
		_, err := Parse("m.yaml", []byte(src))
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "m.yaml") {
			t.Errorf("%q: err = %v, want %q", src, err, want)
		}
	}
	if _, err := Parse("m.yaml", []byte("masks: {}\n")); !errors.Is(err, ErrNoMasks) {
		t.Errorf("empty file: %v", err)
	}
}
