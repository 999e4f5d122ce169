// Package mask holds masks (walk-framework.md, "Masks"): capabilities a
// pipeline node is granted with masks="a,b" at that node only — read-only
// folders, extra skills, context keys set before its prompt, and a line in
// its prompt. Each mask says which node ids and classes it is valid for.
//
// Masks are defined by the operator (nanohost.yaml `masks:`, or a file for
// the CLI's --masks), never by the pipeline: a pipeline can only ask for a
// capability someone granted. Host folders reach a container only through
// the mount allowlist (the container package checks them).
package mask

import (
	"errors"
	"fmt"
	"maps"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"nanohost/internal/pipeline"
)

// Where a mask's grants appear in an agent container.
const (
	// MountRoot holds each mask's folders: /workspace/masks/<mask>/<name>.
	MountRoot = "/workspace/masks"
	// SkillRoot holds each mask's skills: /workspace/mask-skills/<mask>/<skill>;
	// the agent runner installs them for that container only.
	SkillRoot = "/workspace/mask-skills"
)

// Mask is one capability grant. The YAML shape is that of nanohost.yaml's
// `masks:` entries (the key is the name):
//
//	recall:
//	  title: Mask of Recall
//	  description: Prior root-cause analyses, read-only
//	  nodes: [recall]              # node ids it is valid for ("*": any node)
//	  classes: [intake]            # node classes it is valid for
//	  mounts: ["~/rca-db:prior-rca"]   # HOST[:NAME], read-only
//	  skills: ["~/skills/rca-search"]  # folders holding a SKILL.md
//	  context: {prior_rca_available: "true"}
//	  preamble: Consult the prior analyses before you classify.
type Mask struct {
	Name        string            `yaml:"-" json:"name"`
	Title       string            `yaml:"title,omitempty" json:"title,omitempty"`
	Description string            `yaml:"description,omitempty" json:"description,omitempty"`
	Nodes       []string          `yaml:"nodes,omitempty" json:"nodes,omitempty"`
	Classes     []string          `yaml:"classes,omitempty" json:"classes,omitempty"`
	Mounts      []string          `yaml:"mounts,omitempty" json:"mounts,omitempty"`
	Skills      []string          `yaml:"skills,omitempty" json:"skills,omitempty"`
	Context     map[string]string `yaml:"context,omitempty" json:"context,omitempty"`
	Preamble    string            `yaml:"preamble,omitempty" json:"preamble,omitempty"`
}

// DisplayName is the title, else the name.
func (m *Mask) DisplayName() string {
	if t := strings.TrimSpace(m.Title); t != "" {
		return t
	}
	return m.Name
}

// AnyNode in Nodes makes a mask valid for every node.
const AnyNode = "*"

// ValidFor reports whether a node may wear the mask: its id is in Nodes
// (or Nodes has "*"), or it has a class in Classes.
func (m *Mask) ValidFor(n *pipeline.Node) bool {
	if slices.Contains(m.Nodes, AnyNode) || slices.Contains(m.Nodes, n.ID) {
		return true
	}
	return slices.ContainsFunc(m.Classes, n.HasClass)
}

// ValidForText says where the mask may be worn, for messages: "nodes a, b;
// classes c".
func (m *Mask) ValidForText() string {
	var parts []string
	if len(m.Nodes) > 0 {
		parts = append(parts, "nodes "+strings.Join(m.Nodes, ", "))
	}
	if len(m.Classes) > 0 {
		parts = append(parts, "classes "+strings.Join(m.Classes, ", "))
	}
	if len(parts) == 0 {
		return "no node"
	}
	return strings.Join(parts, "; ")
}

// Mount is one read-only folder a mask grants: the host directory and where
// the agent sees it.
type Mount struct {
	Host   string // as configured (~ allowed); the allowlist resolves it
	Name   string // the folder's name under MountRoot/<mask>/
	Target string // the path inside the container
}

// ParseMount reads a mask's "HOST[:NAME][:ro]" mount. Masks grant read-only
// folders only: ":rw" is refused.
func (m *Mask) ParseMount(spec string) (Mount, error) {
	parts := strings.Split(spec, ":")
	host, rest := parts[0], parts[1:]
	if n := len(rest); n > 0 && (rest[n-1] == "ro" || rest[n-1] == "rw") {
		if rest[n-1] == "rw" {
			return Mount{}, fmt.Errorf("mount %q: masks grant read-only folders; drop :rw (a stage that must write works in its workspace)", spec)
		}
		rest = rest[:n-1]
	}
	if strings.TrimSpace(host) == "" {
		return Mount{}, fmt.Errorf("mount %q: empty host path: use HOST[:NAME]", spec)
	}
	name := filepath.Base(filepath.Clean(host))
	switch len(rest) {
	case 0:
	case 1:
		name = rest[0]
	default:
		return Mount{}, fmt.Errorf("mount %q: use HOST[:NAME]", spec)
	}
	if !folderRE().MatchString(name) {
		return Mount{}, fmt.Errorf("mount %q: folder name %q: use letters, digits, '-', '_' and '.', not starting with '.' (write HOST:NAME to choose one)", spec, name)
	}
	return Mount{Host: host, Name: name, Target: path.Join(MountRoot, m.Name, name)}, nil
}

// SkillName is the folder name a skill directory installs as.
func SkillName(dir string) string { return filepath.Base(filepath.Clean(dir)) }

// SkillTarget is where the mask's skill folder dir appears in a container.
func (m *Mask) SkillTarget(dir string) string { return path.Join(SkillRoot, m.Name, SkillName(dir)) }

var (
	// Compiled on first use, not at start: every command of the binary
	// would pay for them (the counted repeats compile to hundreds of states).
	nameRE   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`) })
	folderRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}$`) })
	keyRE    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_-]+)*$`) })
)

// reservedKeys are context keys the engine owns: a mask setting them would
// change routing or history behind the author's back.
var reservedKeys = []string{"outcome", "preferred_label", "current_node", "last_stage", "last_response"}

// Problem is one thing wrong with a mask's definition and how to fix it.
// Field is relative to the mask ("mounts[1]", "context.outcome"; "" for
// the mask as a whole).
type Problem struct {
	Mask    string
	Field   string
	Message string
	Fix     string
}

// Path is where the problem is in a configuration: masks.<name>[.<field>].
func (p Problem) Path() string {
	if p.Field == "" {
		return "masks." + p.Mask
	}
	if strings.HasPrefix(p.Field, "[") {
		return "masks." + p.Mask + p.Field
	}
	return "masks." + p.Mask + "." + p.Field
}

func (p Problem) Error() string { return p.Path() + ": " + p.Message + " (fix: " + p.Fix + ")" }

// Check says everything wrong with the mask's definition (not its host
// folders, which only the host can check), each problem with its fix.
func (m *Mask) Check() []Problem {
	var ps []Problem
	add := func(field, msg, fix string) {
		ps = append(ps, Problem{Mask: m.Name, Field: field, Message: msg, Fix: fix})
	}
	if !nameRE().MatchString(m.Name) {
		add("", fmt.Sprintf("name %q is not usable", m.Name), "use lower-case letters, digits, '-' and '_' (it names a folder in the container)")
	}
	if len(m.Nodes) == 0 && len(m.Classes) == 0 {
		add("nodes", "valid for no node", `list the node ids it is for under nodes: (or classes:), e.g. nodes: [recall]; nodes: ["*"] allows any node`)
	}
	for i, n := range m.Nodes {
		if strings.TrimSpace(n) == "" {
			add(fmt.Sprintf("nodes[%d]", i), "is empty", "remove it")
		}
	}
	for i, n := range m.Classes {
		if strings.TrimSpace(n) == "" {
			add(fmt.Sprintf("classes[%d]", i), "is empty", "remove it")
		}
	}
	if strings.ContainsAny(m.Preamble, "\r\n") {
		add("preamble", "is more than one line", "a mask adds one line to the prompt: say the rest in a skill")
	}
	if len(m.Preamble) > 500 {
		add("preamble", fmt.Sprintf("is %d characters", len(m.Preamble)), "keep it to one line of at most 500")
	}
	names := map[string]bool{}
	for i, spec := range m.Mounts {
		field := fmt.Sprintf("mounts[%d]", i)
		mt, err := m.ParseMount(spec)
		switch {
		case err != nil:
			add(field, err.Error(), "write HOST[:NAME], read-only, e.g. ~/rca-db:prior-rca")
		case names[mt.Name]:
			add(field, fmt.Sprintf("a second folder named %q", mt.Name), "give it its own NAME (HOST:NAME)")
		}
		names[mt.Name] = true
	}
	skills := map[string]bool{}
	for i, dir := range m.Skills {
		field := fmt.Sprintf("skills[%d]", i)
		name := SkillName(dir)
		switch {
		case strings.TrimSpace(dir) == "":
			add(field, "is empty", "name a folder holding a SKILL.md")
		case !folderRE().MatchString(name):
			add(field, fmt.Sprintf("folder name %q is not usable", name), "use letters, digits, '-', '_' and '.' (skills install by folder name)")
		case skills[name]:
			add(field, fmt.Sprintf("a second skill folder named %q", name), "skills install by folder name: rename one folder")
		}
		skills[name] = true
	}
	for _, k := range slices.Sorted(maps.Keys(m.Context)) {
		switch {
		case !keyRE().MatchString(k):
			add("context", fmt.Sprintf("key %q is not a context key", k), "use letters, digits and '_', dotted segments allowed (e.g. prior_rca_available)")
		case slices.Contains(reservedKeys, k) || strings.HasPrefix(k, "internal.") || strings.HasPrefix(k, "graph."):
			add("context", fmt.Sprintf("key %q belongs to the engine", k), "choose another name")
		}
	}
	return ps
}

// Set is the masks nodes may wear, by name.
type Set map[string]*Mask

// Lookup finds a mask by the name a node wrote (trimmed, any case).
func (s Set) Lookup(name string) (*Mask, bool) {
	m, ok := s[strings.ToLower(strings.TrimSpace(name))]
	return m, ok
}

// Names lists the masks' names, sorted.
func (s Set) Names() []string { return slices.Sorted(maps.Keys(s)) }

// Check checks every mask.
func (s Set) Check() []Problem {
	var ps []Problem
	for _, name := range s.Names() {
		ps = append(ps, s[name].Check()...)
	}
	return ps
}

// FromMap names each mask after its key: what decoding a `masks:` map gives.
func FromMap(defs map[string]Mask) Set {
	s := make(Set, len(defs))
	for name, m := range defs {
		m.Name = name
		s[name] = &m
	}
	return s
}

// List splits a node's masks attribute ("recall, forge") into names, in
// equip order (first = outermost). Empty entries are kept as "" so lint can
// point them out.
func List(attr string) []string {
	if strings.TrimSpace(attr) == "" {
		return nil
	}
	parts := strings.Split(attr, ",")
	for i, p := range parts {
		parts[i] = strings.ToLower(strings.TrimSpace(p))
	}
	return parts
}

// Resolve returns the masks a node wears, in equip order: an error names
// the first that is unknown or not valid for the node (lint reports every
// one with its fix before a run starts; this is the engine's last check).
func (s Set) Resolve(n *pipeline.Node) ([]*Mask, error) {
	var out []*Mask
	for _, name := range List(n.Attrs["masks"]) {
		m, ok := s.Lookup(name)
		if !ok {
			return nil, fmt.Errorf("node %s wears mask %q, which is not defined here (masks: in nanohost.yaml, or --masks FILE)", n.ID, name)
		}
		if !m.ValidFor(n) {
			return nil, fmt.Errorf("node %s wears mask %q, which is valid only for %s", n.ID, name, m.ValidForText())
		}
		out = append(out, m)
	}
	return out, nil
}

// ErrNoMasks is returned by LoadFile for a file with no masks in it.
var ErrNoMasks = errors.New("no masks defined: write masks: {name: {nodes: [...], ...}}")
