package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"nanohost/internal/mounts"
)

// MountAllowlistPath is runtime.mount_allowlist, or
// ~/.config/nanohost/mount-allowlist.json when it is unset.
func (c *Config) MountAllowlistPath() string {
	if c.Runtime.MountAllowlist != "" {
		return c.Runtime.MountAllowlist
	}
	return mounts.DefaultAllowlistPath()
}

// GroupMounts checks every group's extra mounts against the mount
// allowlist and returns the mounts to make, by group folder. Each refused
// mount is a blocking Problem naming the group, the mount and the rule: a
// group silently missing a directory it was promised would fail later, in
// a container, far from the cause. It needs no Docker (config check runs
// it too).
func (c *Config) GroupMounts() (map[string][]mounts.Mount, []Problem) {
	if !slices.ContainsFunc(c.Groups, func(g Group) bool { return len(g.Mounts) > 0 }) {
		return nil, nil // no allowlist to read
	}
	file := c.MountAllowlistPath()
	policy, err := mounts.LoadPolicy(file)
	if err != nil {
		return nil, []Problem{{"runtime.mount_allowlist", err.Error(),
			`fix the file: {"allowed_roots": [{"path": "~/src", "read_write": false}], "blocked_patterns": []}`, true}}
	}
	fix := allowlistFix(file)
	out := map[string][]mounts.Mount{}
	var ps []Problem
	for i, g := range c.Groups {
		targets := map[string]bool{}
		for j, spec := range g.Mounts {
			m, err := c.groupMount(policy, spec)
			if err == nil && targets[m.Target] {
				err = fmt.Errorf("%s is already mounted by another entry: give this one its own NAME", m.Target)
			}
			if err != nil {
				ps = append(ps, Problem{fmt.Sprintf("groups[%d].mounts[%d]", i, j),
					fmt.Sprintf("group %s: mount %q refused: %v", g.Folder, spec, err), fix, true})
				continue
			}
			targets[m.Target] = true
			out[g.Folder] = append(out[g.Folder], m)
		}
	}
	return out, ps
}

// allowlistFix says how to allow a mount, creating the allowlist when
// there is none yet (a missing file allows no extra mounts).
func allowlistFix(file string) string {
	if _, err := os.Stat(file); errors.Is(err, fs.ErrNotExist) {
		return fmt.Sprintf(`create %s with {"allowed_roots": [{"path": "~/src"}]} (a directory containing the mount; add "read_write": true for :rw), or remove the mount`, file)
	}
	return fmt.Sprintf("use HOST[:NAME][:ro|rw] with HOST under an allowed_roots entry of %s and outside data_dir; credentials (.ssh, .aws, .env, …) are never mounted", file)
}

// groupMount parses one "HOST[:NAME][:ro|rw]" entry and validates it. NAME
// may also be written as the full path the agent sees,
// /workspace/extra/NAME.
func (c *Config) groupMount(policy *mounts.Policy, spec string) (mounts.Mount, error) {
	req, err := mounts.ParseFlag(spec)
	if err != nil {
		return mounts.Mount{}, err
	}
	req.Name = strings.TrimPrefix(req.Name, mounts.ExtraRoot+"/")
	m, err := policy.Validate(req)
	if err != nil {
		return m, err
	}
	// data_dir holds every group's workspace, their IPC queues and the
	// database: a mount over or inside it would let one group read or
	// rewrite another's.
	data := absResolved(c.DataDir)
	if isWithin(m.Source, data) || isWithin(data, m.Source) {
		return m, fmt.Errorf("%s overlaps data_dir %s (every group's workspace and the host's database): mount a directory outside it", m.Source, data)
	}
	return m, nil
}

func absResolved(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		return r
	}
	return abs
}

// isWithin reports whether p is dir or inside it.
func isWithin(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../") && !filepath.IsAbs(rel)
}
