package mounts

import (
	"fmt"
	"os"
	"path/filepath"

	"nanohost/internal/pipeline/mask"
)

// A mask (pipeline/mask) grants read-only folders and skills to the nodes
// that wear it; each goes through the allowlist like any extra mount.

// MaskMountError is a mask folder or skill the allowlist (or the disk)
// refused, with where it was configured.
type MaskMountError struct {
	Mask  string
	Field string // "mounts" or "skills"
	Index int
	Spec  string
	Err   error
}

func (e *MaskMountError) Error() string {
	return fmt.Sprintf("mask %s: %s[%d] %q refused: %v", e.Mask, e.Field, e.Index, e.Spec, e.Err)
}

func (e *MaskMountError) Unwrap() error { return e.Err }

// MaskGrants checks every mask's folders and skills against the policy and
// returns the mounts each mask grants, by name: every mask has an entry,
// empty when it grants no folder. It needs no Docker (config check runs it).
func MaskGrants(policy *Policy, masks mask.Set) (map[string][]Mount, []*MaskMountError) {
	out := make(map[string][]Mount, len(masks))
	var errs []*MaskMountError
	for _, name := range masks.Names() {
		m := masks[name]
		out[name] = []Mount{}
		for i, spec := range m.Mounts {
			mt, err := maskFolder(policy, m, spec)
			if err != nil {
				errs = append(errs, &MaskMountError{Mask: name, Field: "mounts", Index: i, Spec: spec, Err: err})
				continue
			}
			out[name] = append(out[name], mt)
		}
		for i, dir := range m.Skills {
			mt, err := maskSkill(policy, m, dir)
			if err != nil {
				errs = append(errs, &MaskMountError{Mask: name, Field: "skills", Index: i, Spec: dir, Err: err})
				continue
			}
			out[name] = append(out[name], mt)
		}
	}
	return out, errs
}

func maskFolder(policy *Policy, m *mask.Mask, spec string) (Mount, error) {
	mf, err := m.ParseMount(spec)
	if err != nil {
		return Mount{}, err
	}
	mt, err := policy.Validate(Request{HostPath: mf.Host, Name: mf.Name, ReadOnly: true})
	if err != nil {
		return Mount{}, err
	}
	mt.Target = mf.Target
	return mt, nil
}

func maskSkill(policy *Policy, m *mask.Mask, dir string) (Mount, error) {
	mt, err := policy.Validate(Request{HostPath: dir, Name: mask.SkillName(dir), ReadOnly: true})
	if err != nil {
		return Mount{}, err
	}
	if fi, err := os.Stat(filepath.Join(mt.Source, "SKILL.md")); err != nil || !fi.Mode().IsRegular() {
		return Mount{}, fmt.Errorf("%s has no SKILL.md: a skill folder holds a SKILL.md (and whatever it refers to)", mt.Source)
	}
	mt.Target = m.SkillTarget(dir)
	return mt, nil
}
