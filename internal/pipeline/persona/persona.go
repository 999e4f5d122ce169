// Package persona holds the named agent identities a pipeline node can ask
// for with persona="<name>" (walk-framework.md, "Personas"): a prompt
// preamble that gives the same model a different behavioural skin, and
// optional defaults for the node's model, reasoning effort, retries and
// context fidelity.
//
// The framework's eight are built in — the Light investigators herald,
// seeker, sentinel and weaver, and the Shadow court challenger, abyss,
// bulwark and specter. A group (or `--personas DIR`) adds its own as
// markdown files with YAML front matter, overriding a built-in of the same
// name (load.go).
package persona

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Persona is one agent identity.
type Persona struct {
	// Name is how nodes ask for it (persona="seeker"): lower case.
	Name string
	// Title is the display name, the heading of the preamble in a prompt.
	Title string
	// Description says in a line what the persona does (lint's list, docs).
	Description string
	// Preamble is what the agent is told about who it is, before the task.
	Preamble string

	// Defaults a node inherits unless it (or the stylesheet, for the model
	// properties) sets its own; "" or nil means none.
	Model           string // llm_model
	ReasoningEffort string // reasoning_effort
	MaxRetries      *int   // max_retries
	Fidelity        string // fidelity

	// Framework traits (element.go): a custom persona may declare them too.
	Alignment string // light or shadow ("" for a custom persona)
	Element   string // fire, water, earth, air, diamond, lightning, iron ("": none)
	Position  string // PG, C, PF, SG ("": none)
	// Zone is the persona's home zone ("": its position's, Positions).
	Zone string
	// Stickiness (0–3) is how reluctant it is to leave its home zone when
	// the zone does not say (zone attribute stickiness).
	Stickiness int
	// Affinity is how well suited it is to a step (0–1), by the node's step
	// (its step attribute, else its id): what persona=auto picks by.
	Affinity map[string]float64

	// Source is "built-in" or the file the persona was read from.
	Source string
}

// HomeZone is the zone the persona belongs to: its own, else its position's.
func (p *Persona) HomeZone() string {
	if p.Zone != "" {
		return p.Zone
	}
	return Positions[p.Position]
}

// Traits are the persona's element's traits (false: it has no element).
// Iron is derived with accuracy (DefaultIronAccuracy when not measured).
func (p *Persona) Traits(accuracy float64, measured bool) (Traits, bool) {
	return TraitsOf(p.Element, accuracy, measured)
}

// TraitsOf is element's traits, Iron derived with accuracy when measured.
func TraitsOf(element string, accuracy float64, measured bool) (Traits, bool) {
	if Normalize(element) == Iron {
		if !measured {
			accuracy = DefaultIronAccuracy
		}
		return IronFromEarth(accuracy), true
	}
	return ElementTraits(element)
}

// Defaults returns the node attributes the persona supplies, by key.
func (p *Persona) Defaults() map[string]string {
	out := map[string]string{}
	set := func(k, v string) {
		if strings.TrimSpace(v) != "" {
			out[k] = v
		}
	}
	set("llm_model", p.Model)
	set("reasoning_effort", p.ReasoningEffort)
	set("fidelity", p.Fidelity)
	if p.MaxRetries != nil {
		out["max_retries"] = fmt.Sprint(*p.MaxRetries)
	}
	return out
}

// Compiled on first use, not at every command's start.
var nameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`) })

// ValidName reports whether name can name a persona: lower-case letters,
// digits, '-' and '_', starting with a letter or digit, at most 64 long.
func ValidName(name string) bool { return nameRE().MatchString(name) }

// Normalize is the catalogue key for what a node wrote: trimmed, lower case.
func Normalize(name string) string { return strings.ToLower(strings.TrimSpace(name)) }

// Catalog is a set of personas by name. The zero value and nil are empty;
// use Builtin for the framework's eight.
type Catalog struct {
	byName map[string]*Persona
}

// NewCatalog returns a catalogue of ps; a later persona replaces an earlier
// one of the same name.
func NewCatalog(ps ...*Persona) *Catalog {
	c := &Catalog{byName: make(map[string]*Persona, len(ps))}
	for _, p := range ps {
		c.byName[p.Name] = p
	}
	return c
}

// With returns a new catalogue holding c's personas and ps, which override
// those of the same name. c is not changed.
func (c *Catalog) With(ps ...*Persona) *Catalog {
	out := NewCatalog()
	if c != nil {
		maps.Copy(out.byName, c.byName)
	}
	for _, p := range ps {
		out.byName[p.Name] = p
	}
	return out
}

// Lookup finds a persona by the name a node wrote (any case, spaces trimmed).
func (c *Catalog) Lookup(name string) (*Persona, bool) {
	if c == nil {
		return nil, false
	}
	p, ok := c.byName[Normalize(name)]
	return p, ok
}

// Names lists the personas' names, sorted.
func (c *Catalog) Names() []string {
	if c == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(c.byName))
}

// Len is the number of personas.
func (c *Catalog) Len() int {
	if c == nil {
		return 0
	}
	return len(c.byName)
}

// OrBuiltin returns c, or the built-in catalogue when c is nil: what every
// consumer uses when it was given no catalogue.
func OrBuiltin(c *Catalog) *Catalog {
	if c == nil {
		return Builtin()
	}
	return c
}
