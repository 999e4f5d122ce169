// Package skills holds the Claude Code skills mounted read-only into agent
// containers. This test keeps them honest: a skill must never teach a graph,
// a condition or a tag that the host would reject.
package skills

import (
	"bytes"
	"context"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"nanohost/internal/ipc/client"
	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/agenttext"
	"nanohost/internal/pipeline/cond"
	"nanohost/internal/pipeline/frontend"
	"nanohost/internal/pipeline/lint"
	"nanohost/internal/pipeline/mask"
	"nanohost/internal/pipeline/persona"
)

// skillDirs returns every directory here with a SKILL.md.
func skillDirs(t *testing.T) []string {
	t.Helper()
	matches, err := filepath.Glob("*/SKILL.md")
	if err != nil || len(matches) == 0 {
		t.Fatalf("no skills found: %v", err)
	}
	var dirs []string
	for _, m := range matches {
		dirs = append(dirs, filepath.Dir(m))
	}
	return dirs
}

// block is one fenced code block of a markdown file.
type block struct {
	lang string
	body string
	line int // 1-based line of the opening fence
}

func fencedBlocks(md string) []block {
	var out []block
	var cur *block
	var body []string
	for i, l := range strings.Split(md, "\n") {
		fence, isFence := strings.CutPrefix(strings.TrimSpace(l), "```")
		switch {
		case isFence && cur == nil:
			cur, body = &block{lang: strings.TrimSpace(fence), line: i + 1}, nil
		case isFence:
			cur.body = strings.Join(body, "\n") + "\n"
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			body = append(body, l)
		}
	}
	return out
}

var skillName = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// frontMatter reads the YAML front matter's top-level `key: value` lines.
func frontMatter(t *testing.T, md string) map[string]string {
	t.Helper()
	rest, ok := strings.CutPrefix(md, "---\n")
	if !ok {
		t.Fatal("SKILL.md must start with a --- front matter block")
	}
	head, _, ok := strings.Cut(rest, "\n---\n")
	if !ok {
		t.Fatal("SKILL.md front matter is not closed with ---")
	}
	fm := map[string]string{}
	for _, l := range strings.Split(head, "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && !strings.HasPrefix(l, " ") {
			fm[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return fm
}

func TestSkillFrontMatter(t *testing.T) {
	for _, dir := range skillDirs(t) {
		t.Run(dir, func(t *testing.T) {
			md := readFile(t, filepath.Join(dir, "SKILL.md"))
			fm := frontMatter(t, md)
			if name := fm["name"]; name != dir || !skillName.MatchString(name) || len(name) > 64 {
				t.Errorf("name %q: want the directory name %q in lowercase letters, digits and hyphens", name, dir)
			}
			if d := fm["description"]; len(d) < 40 || len(d) > 1024 {
				t.Errorf("description is %d characters; Claude Code needs a description (up to 1024) that says what the skill does and when to use it", len(d))
			}
		})
	}
}

// requireClean fails on any diagnostic: a taught graph must not even warn.
// masks are the masks the skill teaches an operator to define.
func requireClean(t *testing.T, name string, src []byte, masks mask.Set, schemaDirs ...string) {
	t.Helper()
	g, diags, err := frontend.Prepare(name, src, frontend.Options{Masks: masks, SchemaDirs: schemaDirs, PipelineDirs: schemaDirs})
	if err != nil {
		t.Fatalf("%s does not parse: %v", name, err)
	}
	for _, d := range diags {
		t.Errorf("%s", d.String())
	}
	if g.StartNode() == nil || len(g.ExitNodes()) == 0 {
		t.Errorf("%s has no start or exit", name)
	}
	for _, n := range g.Nodes {
		// Lint accepts it, but the default is only taken on a timeout.
		if n.Attrs["human.default_choice"] != "" && n.Attrs["timeout"] == "" {
			t.Errorf("%s: gate %s has human.default_choice but no timeout, so the default is never taken", name, n.ID)
		}
	}
}

func TestWorkflowsValidateWithoutWarnings(t *testing.T) {
	for _, dir := range skillDirs(t) {
		files, _ := filepath.Glob(filepath.Join(dir, "workflows", "*.dot"))
		md := readFile(t, filepath.Join(dir, "SKILL.md"))
		for _, f := range files {
			t.Run(f, func(t *testing.T) {
				requireClean(t, f, []byte(readFile(t, f)), nil, filepath.Dir(f))
				if !strings.Contains(md, filepath.Base(f)) {
					t.Errorf("SKILL.md does not mention %s: an example the agent is not told about is never used", filepath.Base(f))
				}
			})
		}
	}
}

func TestDOTSnippetsInSkillsValidate(t *testing.T) {
	for _, dir := range skillDirs(t) {
		path := filepath.Join(dir, "SKILL.md")
		masks := taughtMasks(t, path)
		n := 0
		for _, b := range fencedBlocks(readFile(t, path)) {
			if b.lang != "dot" {
				continue
			}
			n++
			name := path + "#L" + strconv.Itoa(b.line) // the dot block opening at that line
			// A sub-pipeline names a stored pipeline: the host finds the
			// skill's workflows by name.
			t.Run(name, func(t *testing.T) { requireClean(t, name, []byte(b.body), masks, filepath.Join(dir, "workflows")) })
		}
		if dir == "attractor" && n < 3 {
			t.Errorf("%s teaches only %d complete graphs", path, n)
		}
	}
}

// taughtMasks reads the ```yaml blocks of a skill that define masks (as an
// operator would in nanohost.yaml): each must be a valid definition, and
// the skill's graphs may wear them.
func taughtMasks(t *testing.T, path string) mask.Set {
	t.Helper()
	out := mask.Set{}
	for _, b := range fencedBlocks(readFile(t, path)) {
		if b.lang != "yaml" || !strings.HasPrefix(b.body, "masks:") {
			continue
		}
		s, err := mask.Parse(path+"#L"+strconv.Itoa(b.line), []byte(b.body))
		if err != nil {
			t.Errorf("the skill teaches a mask definition the host rejects: %v", err)
			continue
		}
		maps.Copy(out, s)
	}
	return out
}

// TestPersonaFilesInSkillsParse checks ```markdown blocks with front matter
// with the parser the host reads a group's personas/ folder with.
func TestPersonaFilesInSkillsParse(t *testing.T) {
	for _, dir := range skillDirs(t) {
		path := filepath.Join(dir, "SKILL.md")
		n := 0
		for _, b := range fencedBlocks(readFile(t, path)) {
			if b.lang != "markdown" || !strings.HasPrefix(b.body, "---\n") {
				continue
			}
			n++
			if _, err := persona.Parse("example.md", []byte(b.body)); err != nil {
				t.Errorf("%s#L%d: the skill teaches a persona file the host rejects: %v", path, b.line, err)
			}
		}
		if dir == "attractor" && n == 0 {
			t.Errorf("%s teaches no persona file", path)
		}
	}
}

// TestSkillTeachesEveryBuiltinPersona keeps the persona table in step with the host.
func TestSkillTeachesEveryBuiltinPersona(t *testing.T) {
	md := readFile(t, filepath.Join("attractor", "SKILL.md"))
	for _, name := range persona.Builtin().Names() {
		if !strings.Contains(md, "| `"+name+"` |") {
			t.Errorf("the skill's persona table lacks %s", name)
		}
	}
}

// TestConditionsInSkillsParse checks every line of a ```condition block
// with the engine's strict condition parser.
func TestConditionsInSkillsParse(t *testing.T) {
	for _, dir := range skillDirs(t) {
		md := readFile(t, filepath.Join(dir, "SKILL.md"))
		for _, b := range fencedBlocks(md) {
			if b.lang != "condition" {
				continue
			}
			for _, line := range strings.Split(strings.TrimSpace(b.body), "\n") {
				if _, err := cond.Parse(line); err != nil {
					t.Errorf("%s: condition %q is rejected by the host: %v", dir, line, err)
				}
			}
		}
	}
}

// TestOutcomeTagsInSkillsParse checks ```tags blocks with the parser the
// engine reads agent answers with: every tag understood, none ignored.
func TestOutcomeTagsInSkillsParse(t *testing.T) {
	for _, dir := range skillDirs(t) {
		md := readFile(t, filepath.Join(dir, "SKILL.md"))
		for _, b := range fencedBlocks(md) {
			if b.lang != "tags" {
				continue
			}
			p := agenttext.Parse("Done.\n" + b.body)
			if len(p.Warnings) > 0 {
				t.Errorf("%s: tags the engine does not understand: %v", dir, p.Warnings)
			}
			lines := strings.Count(strings.TrimSpace(b.body), "\n") + 1
			understood := len(p.Next) + len(p.Context)
			if p.Status != "" {
				understood++
			}
			if p.PreferredLabel != "" {
				understood++
			}
			if understood != lines {
				t.Errorf("%s: %d tag lines but the engine understood %d: %+v", dir, lines, understood, p)
			}
		}
	}
}

// TestSkillTeachesOnlyKnownShapes keeps the shape table in step with the model.
func TestSkillTeachesOnlyKnownShapes(t *testing.T) {
	md := readFile(t, filepath.Join("attractor", "SKILL.md"))
	_, section, _ := strings.Cut(md, "### Shapes")
	section, _, _ = strings.Cut(section, "\n### ")
	rows := 0
	for _, m := range regexp.MustCompile("(?m)^\\| `([A-Za-z]+)`[^|]*\\| ([a-z._-]+) ").FindAllStringSubmatch(section, -1) {
		rows++
		shape, handler := m[1], m[2]
		want := pipeline.HandlerTypeForShape(shape)
		if want == "" {
			t.Errorf("the skill teaches shape %s, which has no handler", shape)
			continue
		}
		if handler != want && !(shape == "tripleoctagon" && handler == "fan-in") {
			t.Errorf("the skill says shape %s is %s; the host runs it as %s", shape, handler, want)
		}
	}
	if rows < 8 {
		t.Errorf("the shape table has %d rows, want every shape the host runs in v1 (8)", rows)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestMistakesTableNamesRealRules keeps the skill's table of diagnostics in
// step with the rules the host reports.
func TestMistakesTableNamesRealRules(t *testing.T) {
	md := readFile(t, filepath.Join("attractor", "SKILL.md"))
	_, section, ok := strings.Cut(md, "## Mistakes the host will reject")
	if !ok {
		t.Fatal("SKILL.md has no table of the mistakes the host rejects")
	}
	known := map[string]bool{"syntax": true}
	for _, r := range lint.BuiltinRuleNames() {
		known[r] = true
	}
	rows := regexp.MustCompile("(?m)^\\| ([^|]+)\\|").FindAllStringSubmatch(section, -1)
	n := 0
	for _, row := range rows {
		for _, rule := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(row[1], -1) {
			n++
			if !known[rule[1]] {
				t.Errorf("the skill names diagnostic rule %q, which the host never reports", rule[1])
			}
		}
	}
	if n < 10 {
		t.Errorf("found %d rule names in the table; the pattern no longer reads it", n)
	}
}

// TestSkillTeachesOnlyRealIPCCommands checks every `nanoagent ipc` command
// and flag the skill shows against the client's own usage text.
func TestSkillTeachesOnlyRealIPCCommands(t *testing.T) {
	var usage bytes.Buffer
	client.Main(context.Background(), []string{"help"}, nil, &usage, io.Discard)
	md := readFile(t, filepath.Join("attractor", "SKILL.md"))
	cmds := regexp.MustCompile(`nanoagent ipc ([a-z-]+)`).FindAllStringSubmatch(md, -1)
	if len(cmds) < 4 {
		t.Fatalf("the skill shows %d nanoagent ipc commands", len(cmds))
	}
	for _, c := range cmds {
		if !regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(c[1]) + ` `).MatchString(usage.String()) {
			t.Errorf("the skill teaches `nanoagent ipc %s`, which the client does not have", c[1])
		}
	}
	for _, f := range regexp.MustCompile("`(--[a-z-]+)").FindAllStringSubmatch(md, -1) {
		if !strings.Contains(usage.String(), f[1]) {
			t.Errorf("the skill teaches the flag %s, which the client's usage does not list", f[1])
		}
	}
}
