package lint

import (
	"strings"
	"testing"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/mask"
	"nanohost/internal/pipeline/persona"
)

func testMasks(t *testing.T) mask.Set {
	t.Helper()
	s, err := mask.Parse("masks.yaml", []byte(`masks:
  recall: {nodes: [recall]}
  judgment: {classes: [review]}
  forge: {nodes: [investigate]}
`))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const identityGraph = `digraph id {
    start [shape=Mdiamond]
    recall [prompt="Recall", persona=herald, masks="recall"]
    investigate [prompt="Investigate", persona="Seeker", masks="forge"]
    review [prompt="Review", class="review", persona=sentinel, masks="judgment"]
    exit [shape=Msquare]
    start -> recall -> investigate -> review -> exit
}`

func TestIdentityRulesAcceptKnownPersonasAndValidMasks(t *testing.T) {
	if ds := check(t, identityGraph, Options{Masks: testMasks(t)}); len(ds) > 0 {
		t.Errorf("unexpected diagnostics:%s", dump(ds))
	}
}

func TestPersonaKnown(t *testing.T) {
	src := strings.Replace(identityGraph, "persona=herald", "persona=hearld", 1)
	ds := byRule(check(t, src, Options{Masks: testMasks(t)}), "persona_known")
	if len(ds) != 1 {
		t.Fatalf("persona_known:%s", dump(ds))
	}
	d := ds[0]
	if d.Severity != pipeline.SeverityError || d.NodeID != "recall" || d.Line != 3 || d.Column != 30 ||
		!strings.HasPrefix(d.Fix, "did you mean herald? use one of abyss, bulwark,") || !strings.Contains(d.Fix, "personas/hearld.md") {
		t.Errorf("diagnostic = %+v", d)
	}

	// A custom persona is known once the catalogue has it.
	src = strings.Replace(identityGraph, "persona=herald", "persona=triager", 1)
	custom := persona.Builtin().With(&persona.Persona{Name: "triager", Preamble: "Sort it."})
	if ds := byRule(check(t, src, Options{Masks: testMasks(t), Personas: custom}), "persona_known"); len(ds) != 0 {
		t.Errorf("custom persona flagged:%s", dump(ds))
	}
	if ds := byRule(check(t, src, Options{Masks: testMasks(t)}), "persona_known"); len(ds) != 1 {
		t.Errorf("without the custom catalogue triager is unknown:%s", dump(ds))
	}
}

func TestMaskKnown(t *testing.T) {
	src := strings.Replace(identityGraph, `masks="recall"`, `masks="recal, recall,recall,"`, 1)
	ds := byRule(check(t, src, Options{Masks: testMasks(t)}), "mask_known")
	if len(ds) != 3 {
		t.Fatalf("mask_known:%s", dump(ds))
	}
	if !strings.Contains(ds[0].Message, `wears mask "recal", which is not defined`) || !strings.HasPrefix(ds[0].Fix, "did you mean recall? define it under masks:") ||
		ds[0].Severity != pipeline.SeverityError || ds[0].Line != 3 {
		t.Errorf("unknown: %+v", ds[0])
	}
	if !strings.Contains(ds[1].Message, `"recall" twice`) || !strings.Contains(ds[2].Message, "empty entry") {
		t.Errorf("duplicate/empty:%s", dump(ds))
	}

	// No masks defined at all says so.
	ds = byRule(check(t, identityGraph), "mask_known")
	if len(ds) != 3 || !strings.Contains(ds[0].Message, "no masks are defined here") || !strings.Contains(ds[0].Fix, "--masks FILE") {
		t.Errorf("without masks:%s", dump(ds))
	}
}

func TestMaskValidFor(t *testing.T) {
	src := strings.Replace(identityGraph, `masks="forge"`, `masks="recall"`, 1)
	ds := byRule(check(t, src, Options{Masks: testMasks(t)}), "mask_valid_for")
	if len(ds) != 1 {
		t.Fatalf("mask_valid_for:%s", dump(ds))
	}
	d := ds[0]
	if d.NodeID != "investigate" || d.Severity != pipeline.SeverityError || d.Line != 4 ||
		!strings.Contains(d.Message, `wears mask "recall", which is valid only for nodes recall`) ||
		!strings.Contains(d.Fix, "add investigate to the mask's nodes:") || !strings.Contains(d.Fix, "masks valid for investigate: forge") {
		t.Errorf("diagnostic = %+v", d)
	}

	// A class-scoped mask suggests the class.
	src = strings.Replace(identityGraph, `masks="forge"`, `masks="judgment"`, 1)
	ds = byRule(check(t, src, Options{Masks: testMasks(t)}), "mask_valid_for")
	if len(ds) != 1 || !strings.Contains(ds[0].Fix, `give investigate class="review"`) || !strings.Contains(ds[0].Message, "classes review") {
		t.Errorf("class mask:%s", dump(ds))
	}
}

// An auto node no team member has any affinity for is a warning that says
// how to fix it; a team naming an unknown persona is an error.
func TestAutoNodeWithoutAffineMemberWarns(t *testing.T) {
	src := `digraph G {
	graph [team="herald,seeker"]
	start [shape=Mdiamond]
	exit [shape=Msquare]
	triage [persona=auto, prompt="triage"]
	paint [persona=auto, prompt="paint the fence"]
	start -> triage -> paint -> exit
}`
	ds := byRule(check(t, src, Options{}), "auto_affinity")
	if len(ds) != 1 || ds[0].NodeID != "paint" || ds[0].Severity != pipeline.SeverityWarning ||
		!strings.Contains(ds[0].Message, "no member of its team (herald, seeker) has any affinity for its step \"paint\"") || !strings.Contains(ds[0].Fix, "step=") {
		t.Fatalf("auto_affinity:%s", dump(ds))
	}
	if ds := byRule(check(t, src, Options{}), "persona_known"); len(ds) != 0 {
		t.Errorf("persona=auto is not an unknown persona:%s", dump(ds))
	}
	bad := strings.Replace(src, `team="herald,seeker"`, `team="herald,seekr"`, 1)
	ds = byRule(check(t, bad, Options{}), "team_known")
	if len(ds) != 1 || ds[0].Severity != pipeline.SeverityError || !strings.Contains(ds[0].Fix, "seeker") {
		t.Fatalf("team_known:%s", dump(ds))
	}
}
