package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Claude Code discovers personal skills only as ~/.claude/skills/<name>/SKILL.md
// (and project skills under .claude/skills/ of the working directory, which
// is the group's own repository and not ours to write). The host mounts its
// skills read-only at /workspace/skills, so at start-up the runner copies
// each of them into $HOME/.claude/skills. A copy, not a symlink: Claude Code
// has not always followed symlinked skill directories, and a copy is a real
// directory however HOME and ~/.claude are mounted.

// hostSkillsDir is where the host mounts skills/ in agent containers;
// maskSkillsDir is where it mounts the skills of the masks the node wears,
// one folder per mask (internal/pipeline/mask.SkillRoot).
const (
	hostSkillsDir = "/workspace/skills"
	maskSkillsDir = "/workspace/mask-skills"
)

// maskManifest, in the skills directory, lists the skills installed for
// the masks of the node this container runs. ~/.claude may outlive the
// container (Claude Code's sessions are kept per group), so the next
// container takes those skills off before it installs its own: a mask's
// skill is the agent's for its node only.
const maskManifest = ".nanohost-mask-skills"

// installHostSkills copies the mounted skills ($NANOAGENT_SKILLS_DIR, else
// /workspace/skills) and the masks' skills ($NANOAGENT_MASK_SKILLS_DIR,
// else /workspace/mask-skills) into $HOME/.claude/skills. Without them the
// agent still works, so a failure is only reported on stderr.
func installHostSkills(stderr io.Writer) {
	home := os.Getenv("HOME")
	if home == "" {
		return
	}
	dst := filepath.Join(home, ".claude", "skills")
	if err := removeMaskSkills(dst); err != nil {
		fmt.Fprintln(stderr, "nanoagent: an earlier node's mask skills could not be removed:", err)
	}
	if err := installSkills(envOr("NANOAGENT_SKILLS_DIR", hostSkillsDir), dst); err != nil {
		fmt.Fprintln(stderr, "nanoagent: skills not installed for the agent:", err)
	}
	if err := installMaskSkills(envOr("NANOAGENT_MASK_SKILLS_DIR", maskSkillsDir), dst); err != nil {
		fmt.Fprintln(stderr, "nanoagent: mask skills not installed for the agent:", err)
	}
}

// removeMaskSkills takes off the skills the manifest in dst lists.
func removeMaskSkills(dst string) error {
	data, err := os.ReadFile(filepath.Join(dst, maskManifest))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range strings.Fields(string(data)) {
		if name != filepath.Base(name) || name == "." || name == ".." {
			continue // not a name this runner wrote
		}
		errs = append(errs, os.RemoveAll(filepath.Join(dst, name)))
	}
	errs = append(errs, os.Remove(filepath.Join(dst, maskManifest)))
	return errors.Join(errs...)
}

// installMaskSkills installs each mask's skills (src/<mask>/<skill>) and
// records them in the manifest.
func installMaskSkills(src, dst string) error {
	masks, err := os.ReadDir(src)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read mask skills: %w", err)
	}
	var names []string
	for _, m := range masks {
		dir := filepath.Join(src, m.Name())
		skills, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		if err := installSkills(dir, dst); err != nil {
			return err
		}
		for _, s := range skills {
			if fi, err := os.Stat(filepath.Join(dir, s.Name(), "SKILL.md")); err == nil && fi.Mode().IsRegular() {
				names = append(names, s.Name())
			}
		}
	}
	if len(names) == 0 {
		return nil
	}
	return os.WriteFile(filepath.Join(dst, maskManifest), []byte(strings.Join(names, "\n")+"\n"), 0o644)
}

// installSkills copies every skill in src (a directory holding a SKILL.md)
// to dst/<name>, replacing an earlier copy of that skill — ~/.claude may
// persist between containers — and leaving the agent's other skills alone.
// A missing src means no skills are mounted.
func installSkills(src, dst string) error {
	entries, err := os.ReadDir(src)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read skills: %w", err)
	}
	for _, e := range entries {
		dir := filepath.Join(src, e.Name())
		if fi, err := os.Stat(filepath.Join(dir, "SKILL.md")); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", dst, err)
		}
		if err := replaceSkill(dir, filepath.Join(dst, e.Name())); err != nil {
			return fmt.Errorf("install skill %s: %w", e.Name(), err)
		}
	}
	return nil
}

// replaceSkill copies the skill into a temporary directory beside dst and
// then swaps it in, so Claude Code never reads a half-copied skill. Two
// containers of a group may do this at once on a shared ~/.claude: the
// loser's rename fails, its copy is removed, and the winner's (the same
// files) stays.
func replaceSkill(src, dst string) (err error) {
	tmp, err := os.MkdirTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	if err := copyTree(src, tmp); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}

// copyTree copies the directories and regular files under src into dst;
// anything else (symlinks, devices) is skipped.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil || rel == "." {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.Mkdir(target, 0o755)
		case d.Type().IsRegular():
			return copyFile(path, target)
		}
		return nil
	})
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
