package config

import (
	"fmt"

	"nanohost/internal/mounts"
	"nanohost/internal/pipeline/mask"
)

// MaskSet is the configured masks, each named after its key.
func (c *Config) MaskSet() mask.Set { return mask.FromMap(c.Masks) }

// MaskMounts checks every mask's definition and its folders and skills
// against the mount allowlist, and returns the mounts each mask grants, by
// name. Every problem blocks: a node asking for a capability it was
// promised must not run without it. It needs no Docker (config check runs
// it too).
func (c *Config) MaskMounts() (map[string][]mounts.Mount, []Problem) {
	if len(c.Masks) == 0 {
		return map[string][]mounts.Mount{}, nil
	}
	set := c.MaskSet()
	var ps []Problem
	for _, p := range set.Check() {
		ps = append(ps, Problem{p.Path(), p.Message, p.Fix, true})
	}
	if len(ps) > 0 {
		return nil, ps // folders are only worth checking once the definitions hold
	}
	file := c.MountAllowlistPath()
	policy, err := mounts.LoadPolicy(file)
	if err != nil {
		return nil, []Problem{{"runtime.mount_allowlist", err.Error(),
			`fix the file: {"allowed_roots": [{"path": "~/src", "read_write": false}], "blocked_patterns": []}`, true}}
	}
	grants, refused := mounts.MaskGrants(policy, set)
	for _, e := range refused {
		ps = append(ps, Problem{fmt.Sprintf("masks.%s.%s[%d]", e.Mask, e.Field, e.Index),
			fmt.Sprintf("mask %s: %s %q refused: %v", e.Mask, e.Field, e.Spec, e.Err), allowlistFix(file), true})
	}
	data := absResolved(c.DataDir)
	for _, name := range set.Names() {
		for _, m := range grants[name] {
			if isWithin(m.Source, data) || isWithin(data, m.Source) {
				ps = append(ps, Problem{"masks." + name, fmt.Sprintf("mask %s: %s overlaps data_dir %s (every group's workspace and the host's database)", name, m.Source, data),
					"grant a folder outside data_dir", true})
			}
		}
	}
	if len(ps) > 0 {
		return nil, ps
	}
	return grants, nil
}
