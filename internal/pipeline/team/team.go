// Package team is the team walk's scheduler (walk-framework.md, "Team
// Walk", "Scheduler", "Cycles"): for a node with persona=auto it picks the
// member of the graph's team who works the visit — the highest step
// affinity, ties broken by element match with the node's zone, then by
// team order; a walker in its home zone stays unless another's affinity
// exceeds its own by the zone's stickiness margin; members whose element
// destroys the zone's element are avoided unless the zone (or graph) is
// adversarial. The decision is data (Assignment): the engine records it as
// a WalkerSwitch event, runlog words it. Deterministic: no randomness, no
// clock, no I/O.
package team

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/persona"
)

// Auto is the persona value that asks the team walk for a walker.
const Auto = "auto"

// DefaultTeam is the team of a graph that declares none: the four Light personas.
var DefaultTeam = []string{"herald", "seeker", "sentinel", "weaver"}

// IsAuto reports whether a node's persona attribute asks for the team walk.
func IsAuto(n *pipeline.Node) bool { return persona.Normalize(n.Attrs["persona"]) == Auto }

// Zone is a named subgraph with a zone attribute (a cluster of the court:
// subgraph cluster_front { zone=frontcourt; element=water; stickiness=2 }).
type Zone struct {
	Subgraph   string // the subgraph's id
	Name       string // its zone attribute
	Element    string // "" when it gives none
	Stickiness int    // meaningful when HasStickiness
	// HasStickiness says the zone sets stickiness; otherwise a walker's own applies.
	HasStickiness bool
	Team          []string // its team attribute (nil: the graph's)
	Adversarial   bool
}

// ZoneOf is the innermost zone enclosing n (nil: none).
func ZoneOf(g *pipeline.Graph, n *pipeline.Node) *Zone {
	for i := len(n.Subgraphs) - 1; i >= 0; i-- {
		id := n.Subgraphs[i]
		a := g.SubgraphAttrs[id]
		name := strings.TrimSpace(a["zone"])
		if name == "" {
			continue
		}
		z := &Zone{Subgraph: id, Name: strings.ToLower(name), Element: persona.Normalize(a["element"]), Team: List(a["team"])}
		if s, err := strconv.Atoi(strings.TrimSpace(a["stickiness"])); err == nil {
			z.Stickiness, z.HasStickiness = min(max(s, 0), persona.MaxStickiness), true
		}
		z.Adversarial, _ = a.Bool("adversarial", false)
		return z
	}
	return nil
}

// List splits a comma-separated list of persona names (normalised, empty
// entries dropped).
func List(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = persona.Normalize(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// Members is the team working n: its zone's team, else the graph's team
// attribute, else DefaultTeam.
func Members(g *pipeline.Graph, n *pipeline.Node) []string {
	if z := ZoneOf(g, n); z != nil && len(z.Team) > 0 {
		return z.Team
	}
	if t := List(g.Attrs["team"]); len(t) > 0 {
		return t
	}
	return DefaultTeam
}

// Step is what affinities are keyed by: the node's step attribute, else its id.
func Step(n *pipeline.Node) string {
	if s := strings.TrimSpace(n.Attrs["step"]); s != "" {
		return strings.ToLower(s)
	}
	return strings.ToLower(n.ID)
}

// Adversarial reports whether destructive pairings are allowed at n: its
// zone, else the graph, says adversarial=true.
func Adversarial(g *pipeline.Graph, z *Zone) bool {
	if z != nil && z.Adversarial {
		return true
	}
	b, _ := g.Attrs.Bool("adversarial", false)
	return b
}

// Candidate is one team member as the scheduler saw it.
type Candidate struct {
	Persona  string  `json:"persona"`
	Element  string  `json:"element,omitempty"`
	Affinity float64 `json:"affinity"`
	// Avoided: its element destroys the zone's (the destructive cycle).
	Avoided bool `json:"avoided,omitempty"`
}

// Rules say what decided an assignment.
const (
	RuleAffinity   = "affinity"    // the highest affinity, alone
	RuleElement    = "element"     // a tie on affinity, broken by element match with the zone
	RuleTeamOrder  = "team_order"  // a tie on affinity and element, broken by team order
	RuleStickiness = "stickiness"  // the previous walker stayed in its home zone
	RuleAllAvoided = "all_avoided" // every member's element destroys the zone's: none avoided
)

// Assignment is who works a visit of an auto node, and why.
type Assignment struct {
	Walker   string `json:"walker"`
	Previous string `json:"previous,omitempty"` // who worked the walk's last persona node
	Step     string `json:"step"`
	Zone     string `json:"zone,omitempty"`
	// ZoneElement is the element ties and the destructive cycle are judged by.
	ZoneElement string      `json:"zone_element,omitempty"`
	Rule        string      `json:"rule"`
	Candidates  []Candidate `json:"candidates"`
	// Adversarial: destructive pairings were allowed (the court).
	Adversarial bool `json:"adversarial,omitempty"`
	// Margin is the stickiness margin the previous walker held its home
	// zone by (0 when it did not apply).
	Margin float64 `json:"margin,omitempty"`
	// Challenger is who would have taken the node without stickiness.
	Challenger string `json:"challenger,omitempty"`
}

// Switched reports whether the walker changed.
func (a Assignment) Switched() bool { return a.Walker != a.Previous }

// UnknownMemberError is a team naming a persona the catalogue lacks.
type UnknownMemberError struct {
	Node, Member string
	Known        []string
}

func (e *UnknownMemberError) Error() string {
	return fmt.Sprintf("node %s's team names %q, which is not a persona here (known: %s)", e.Node, e.Member, strings.Join(e.Known, ", "))
}

// Assign picks the walker of a visit of n (persona=auto) from its team,
// given who worked the walk's previous persona node ("" for none).
func Assign(g *pipeline.Graph, n *pipeline.Node, cat *persona.Catalog, previous string) (Assignment, error) {
	cat = persona.OrBuiltin(cat)
	z := ZoneOf(g, n)
	a := Assignment{Previous: previous, Step: Step(n), Adversarial: Adversarial(g, z)}
	if z != nil {
		a.Zone, a.ZoneElement = z.Name, z.Element
	}
	if a.ZoneElement == "" {
		a.ZoneElement = persona.Normalize(n.Attrs["element"])
	}
	var members []*persona.Persona
	for _, name := range Members(g, n) {
		p, ok := cat.Lookup(name)
		if !ok {
			return a, &UnknownMemberError{Node: n.ID, Member: name, Known: cat.Names()}
		}
		if slices.Contains(members, p) {
			continue
		}
		members = append(members, p)
		c := Candidate{Persona: p.Name, Element: persona.Normalize(p.Element), Affinity: p.Affinity[a.Step]}
		c.Avoided = !a.Adversarial && a.ZoneElement != "" && persona.Destroys(c.Element, a.ZoneElement)
		a.Candidates = append(a.Candidates, c)
	}
	pool := make([]int, 0, len(a.Candidates))
	for i, c := range a.Candidates {
		if !c.Avoided {
			pool = append(pool, i)
		}
	}
	allAvoided := len(pool) == 0
	if allAvoided {
		for i := range a.Candidates {
			pool = append(pool, i)
		}
	}
	// The best: highest affinity; then element match; then team order
	// (the pool is in team order and SortStableFunc keeps it).
	ranked := slices.Clone(pool)
	slices.SortStableFunc(ranked, func(i, j int) int {
		ci, cj := a.Candidates[i], a.Candidates[j]
		if c := cmp.Compare(cj.Affinity, ci.Affinity); c != 0 {
			return c
		}
		return cmp.Compare(matchRank(cj, a.ZoneElement), matchRank(ci, a.ZoneElement))
	})
	best := a.Candidates[ranked[0]]
	a.Walker, a.Rule = best.Persona, RuleAffinity
	if len(ranked) > 1 {
		second := a.Candidates[ranked[1]]
		switch {
		case second.Affinity != best.Affinity:
		case matchRank(best, a.ZoneElement) != matchRank(second, a.ZoneElement):
			a.Rule = RuleElement
		default:
			a.Rule = RuleTeamOrder
		}
	}
	if allAvoided {
		a.Rule = RuleAllAvoided
	}
	// Stickiness: the previous walker, at home in this zone, stays unless
	// the best exceeds its affinity by more than the margin.
	if z == nil || previous == "" || previous == best.Persona {
		return a, nil
	}
	prev, ok := cat.Lookup(previous)
	i := slices.IndexFunc(a.Candidates, func(c Candidate) bool { return c.Persona == previous })
	if !ok || i < 0 || !slices.Contains(pool, i) || !strings.EqualFold(prev.HomeZone(), z.Name) {
		return a, nil
	}
	level := prev.Stickiness
	if z.HasStickiness {
		level = z.Stickiness
	}
	margin := float64(level) * persona.StickinessMargin
	if level > 0 && best.Affinity-a.Candidates[i].Affinity <= margin+1e-9 {
		a.Challenger, a.Walker, a.Rule, a.Margin = best.Persona, previous, RuleStickiness, margin
	}
	return a, nil
}

func matchRank(c Candidate, zoneElement string) int {
	if zoneElement != "" && c.Element == zoneElement {
		return 1
	}
	return 0
}

// HasAffinity reports whether any member of n's team has an affinity above
// zero for n's step (lint warns when none does: the pick would be arbitrary).
func HasAffinity(g *pipeline.Graph, n *pipeline.Node, cat *persona.Catalog) bool {
	cat = persona.OrBuiltin(cat)
	step := Step(n)
	for _, name := range Members(g, n) {
		if p, ok := cat.Lookup(name); ok && p.Affinity[step] > 0 {
			return true
		}
	}
	return false
}
