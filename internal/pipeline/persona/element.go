package persona

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Elements are behavioural archetypes with numbers (walk-framework.md,
// "Elements"): how many times a walker retries a step (MaxLoops), the
// confidence at which it calls the evidence enough (Convergence), how
// readily it takes a shortcut edge (ShortcutAffinity), how many sources it
// gathers (EvidenceDepth) and how it fails. A node worked by a persona of an
// element — or with element="…" of its own — takes these as defaults the
// author can override: max_retries, convergence, shortcut_affinity and
// evidence_depth (docs/personas.md, "Elements are traits").

// Traits are an element's numbers.
type Traits struct {
	Element          string
	Speed            string
	MaxLoops         int
	Convergence      float64
	ShortcutAffinity float64
	EvidenceDepth    int
	FailureMode      string
}

// The six core elements, exactly as the seed's table gives them.
var coreElements = []Traits{
	{Element: "fire", Speed: "fast", MaxLoops: 0, Convergence: 0.50, ShortcutAffinity: 0.9, EvidenceDepth: 2, FailureMode: "burns out (token waste)"},
	{Element: "lightning", Speed: "fastest", MaxLoops: 0, Convergence: 0.40, ShortcutAffinity: 1.0, EvidenceDepth: 1, FailureMode: "brittle (wrong path, no recovery)"},
	{Element: "earth", Speed: "steady", MaxLoops: 1, Convergence: 0.70, ShortcutAffinity: 0.1, EvidenceDepth: 5, FailureMode: "bloat (too many steps)"},
	{Element: "diamond", Speed: "precise", MaxLoops: 0, Convergence: 0.95, ShortcutAffinity: 0.5, EvidenceDepth: 10, FailureMode: "shatters (ambiguity kills it)"},
	{Element: "water", Speed: "deep", MaxLoops: 3, Convergence: 0.85, ShortcutAffinity: 0.1, EvidenceDepth: 8, FailureMode: "slow (analysis paralysis)"},
	{Element: "air", Speed: "holistic", MaxLoops: 1, Convergence: 0.60, ShortcutAffinity: 0.6, EvidenceDepth: 3, FailureMode: "floaty (vague, no evidence)"},
}

// Iron is the derived element: Earth re-tuned by measured accuracy.
const Iron = "iron"

// DefaultIronAccuracy is the accuracy Iron is derived with when nothing is
// recorded for its persona yet: the seed's own calibration example.
const DefaultIronAccuracy = 0.80

// Elements lists every element name a node or persona may give, the six
// core ones then iron.
func Elements() []string {
	out := make([]string, 0, len(coreElements)+1)
	for _, t := range coreElements {
		out = append(out, t.Element)
	}
	return append(out, Iron)
}

// ValidElement reports whether name (any case) names an element.
func ValidElement(name string) bool { return slices.Contains(Elements(), Normalize(name)) }

// ElementTraits returns a core element's traits; for iron, Earth re-tuned
// with DefaultIronAccuracy (use IronFromEarth for a measured accuracy).
func ElementTraits(name string) (Traits, bool) {
	name = Normalize(name)
	if name == Iron {
		return IronFromEarth(DefaultIronAccuracy), true
	}
	for _, t := range coreElements {
		if t.Element == name {
			return t, true
		}
	}
	return Traits{}, false
}

// IronFromEarth derives Iron from Earth with the seed's formula:
//
//	MaxLoops    = max(0, Earth.MaxLoops - floor(accuracy * 2))
//	Convergence = Earth.Convergence + (1 - accuracy) * 0.1
//	FailureMode = "rigid (over-calibrated to past data)"
//
// Speed, shortcut affinity and evidence depth stay Earth's. accuracy is
// clamped to [0, 1]; NaN counts as the default.
func IronFromEarth(accuracy float64) Traits {
	if math.IsNaN(accuracy) {
		accuracy = DefaultIronAccuracy
	}
	accuracy = min(1, max(0, accuracy))
	earth, _ := ElementTraits("earth")
	iron := earth
	iron.Element = Iron
	iron.MaxLoops = max(0, earth.MaxLoops-int(math.Floor(accuracy*2)))
	// Rounded to 4 places: 0.70 + 0.2*0.1 is 0.72, not 0.7200000000000001.
	iron.Convergence = math.Round((earth.Convergence+(1-accuracy)*0.1)*1e4) / 1e4
	iron.FailureMode = "rigid (over-calibrated to past data)"
	return iron
}

// ShortcutThreshold is the least shortcut affinity at which a walker takes
// an edge marked shortcut=true whose condition holds: the seed's
// "probability of taking a fast-path edge" made deterministic — at 0.5 or
// more it always does, below never.
const ShortcutThreshold = 0.5

// Attrs are the node attributes the traits give, by key.
func (t Traits) Attrs() map[string]string {
	return map[string]string{
		"max_retries":       fmt.Sprint(t.MaxLoops),
		"convergence":       formatFloat(t.Convergence),
		"shortcut_affinity": formatFloat(t.ShortcutAffinity),
		"evidence_depth":    fmt.Sprint(t.EvidenceDepth),
	}
}

func formatFloat(f float64) string {
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.4f", f), "0"), ".")
}

// The cycles between elements (walk-framework.md, "Cycles"). Generative:
// each element strengthens the next, Fire → Earth → Water → Air → Fire.
// Destructive: each element challenges another; a walker whose element
// destroys its zone's element "will fight the work", so the team walk
// avoids it outside an adversarial zone (the court). Iron counts as Earth.
var (
	generative  = map[string]string{"fire": "earth", "earth": "water", "water": "air", "air": "fire"}
	destructive = map[string]string{"fire": "water", "water": "earth", "earth": "fire", "lightning": "diamond", "diamond": "air", "air": "lightning"}
)

func cycleElement(e string) string {
	e = Normalize(e)
	if e == Iron {
		return "earth"
	}
	return e
}

// Destroys reports whether element a challenges element b (the destructive cycle).
func Destroys(a, b string) bool {
	a, b = cycleElement(a), cycleElement(b)
	return a != "" && destructive[a] == b
}

// Generates reports whether element a strengthens element b (the generative cycle).
func Generates(a, b string) bool {
	a, b = cycleElement(a), cycleElement(b)
	return a != "" && generative[a] == b
}

// Positions are the structural roles, each with its home zone.
var Positions = map[string]string{"PG": "backcourt", "C": "frontcourt", "PF": "frontcourt", "SG": "paint"}

// PositionNames lists the positions in the seed's order.
var PositionNames = []string{"PG", "C", "PF", "SG"}

// MaxStickiness is the highest stickiness (0–3, walk-framework.md).
const MaxStickiness = 3

// StickinessMargin is how much more affinity another walker needs, per
// level of stickiness, to take a node of a walker's home zone from it.
const StickinessMargin = 0.1
