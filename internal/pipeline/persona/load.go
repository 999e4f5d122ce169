package persona

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"

	"gopkg.in/yaml.v3"

	"nanohost/internal/pipeline/fidelity"
)

// A custom persona is a markdown file, NAME.md, in a group's personas/
// folder (or the CLI's --personas DIR):
//
//	---
//	name: triager              # default: the file name without .md
//	title: Triager             # default: the name, capitalised
//	description: Sorts incoming failures in one pass.
//	llm_model: claude-haiku-4-5
//	reasoning_effort: low      # low, medium or high
//	max_retries: 1
//	fidelity: compact
//	element: earth             # its traits (element.go): fire, lightning, earth, diamond, water, air, iron
//	position: PG               # PG, C, PF or SG: its home zone, unless zone says
//	zone: backcourt
//	stickiness: 1              # 0–3
//	affinity: {triage: 0.9}    # 0–1 per step, what persona=auto picks by
//	---
//	You are the Triager. Read the failure once, …
//
// The body is the preamble. Every front matter key is optional; a file
// without front matter is all preamble.
//
// The folder may be one agents can write (a group's workspace), so files are
// read as hostile input: symbolic links and non-regular files are refused
// (a link could otherwise put a host file into a prompt), and sizes are bounded.

// Limits on what LoadDir reads.
const (
	MaxFileBytes = 64 << 10
	MaxFiles     = 256
)

// frontMatter is the YAML head of a persona file.
type frontMatter struct {
	Name            string `yaml:"name"`
	Title           string `yaml:"title"`
	Description     string `yaml:"description"`
	LLMModel        string `yaml:"llm_model"`
	ReasoningEffort string `yaml:"reasoning_effort"`
	MaxRetries      *int   `yaml:"max_retries"`
	Fidelity        string `yaml:"fidelity"`
	// The walk framework's traits (element.go): read as any, so each
	// mistake gets its own message and fix.
	Element    string `yaml:"element"`
	Position   string `yaml:"position"`
	Zone       string `yaml:"zone"`
	Stickiness any    `yaml:"stickiness"`
	Affinity   any    `yaml:"affinity"`
}

// frontMatterKeys are the keys a persona file may set, for messages.
const frontMatterKeys = "name, title, description, llm_model, reasoning_effort, max_retries, fidelity, element, position, zone, stickiness, affinity"

// Efforts are the reasoning_effort values a persona may set.
var Efforts = []string{"low", "medium", "high"}

// Parse reads one persona file; file names it in errors and gives the
// default name (its base name without .md).
func Parse(file string, data []byte) (*Persona, error) {
	head, body, err := splitFrontMatter(data)
	if err != nil {
		return nil, fmt.Errorf("persona %s: %w", file, err)
	}
	var fm frontMatter
	if len(bytes.TrimSpace(head)) > 0 {
		dec := yaml.NewDecoder(bytes.NewReader(head))
		dec.KnownFields(true)
		if err := dec.Decode(&fm); err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("persona %s: front matter: %w (keys: %s)", file, err, frontMatterKeys)
		}
	}
	p := &Persona{
		Name: Normalize(fm.Name), Title: strings.TrimSpace(fm.Title), Description: strings.TrimSpace(fm.Description),
		Preamble: strings.TrimSpace(string(body)), Model: strings.TrimSpace(fm.LLMModel),
		ReasoningEffort: Normalize(fm.ReasoningEffort), MaxRetries: fm.MaxRetries, Fidelity: strings.TrimSpace(fm.Fidelity),
		Source:  file,
		Element: Normalize(fm.Element), Position: strings.ToUpper(strings.TrimSpace(fm.Position)), Zone: Normalize(fm.Zone),
	}
	var traitErrs []error
	p.Stickiness, traitErrs = readStickiness(fm.Stickiness, traitErrs)
	p.Affinity, traitErrs = readAffinity(fm.Affinity, traitErrs)
	if p.Name == "" {
		p.Name = Normalize(strings.TrimSuffix(filepath.Base(file), filepath.Ext(file)))
	}
	if p.Title == "" {
		p.Title = strings.ToUpper(p.Name[:min(1, len(p.Name))]) + p.Name[min(1, len(p.Name)):]
	}
	if err := errors.Join(append([]error{p.check()}, traitErrs...)...); err != nil {
		return nil, fmt.Errorf("persona %s: %w", file, err)
	}
	return p, nil
}

// readStickiness reads stickiness: a whole number from 0 to 3.
func readStickiness(v any, errs []error) (int, []error) {
	if v == nil {
		return 0, errs
	}
	n, ok := v.(int)
	if !ok || n < 0 || n > MaxStickiness {
		return 0, append(errs, fmt.Errorf("stickiness %v: use a whole number from 0 (moves freely) to %d (stays in its home zone)", v, MaxStickiness))
	}
	return n, errs
}

// readAffinity reads affinity: a map of step to a number from 0 to 1.
func readAffinity(v any, errs []error) (map[string]float64, []error) {
	if v == nil {
		return nil, errs
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, append(errs, fmt.Errorf("affinity: write a map of step to a number from 0 to 1, such as affinity: {triage: 0.9, investigate: 0.3}"))
	}
	out := make(map[string]float64, len(m))
	for _, step := range slices.Sorted(maps.Keys(m)) {
		key := strings.ToLower(strings.TrimSpace(step))
		if !stepRE().MatchString(key) {
			errs = append(errs, fmt.Errorf("affinity step %q: name a step as nodes do (a node id or its step attribute: letters, digits and _)", step))
			continue
		}
		var f float64
		switch n := m[step].(type) {
		case int:
			f = float64(n)
		case float64:
			f = n
		default:
			errs = append(errs, fmt.Errorf("affinity.%s %v: use a number from 0 (no use at this step) to 1 (the best at it)", step, m[step]))
			continue
		}
		if f < 0 || f > 1 || math.IsNaN(f) {
			errs = append(errs, fmt.Errorf("affinity.%s %v: use a number from 0 (no use at this step) to 1 (the best at it)", step, m[step]))
			continue
		}
		out[key] = f
	}
	return out, errs
}

// Compiled on first use, as nameRE is: not by every command at start.
var stepRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z_][a-z0-9_]{0,63}$`) })

// check says what is wrong with a persona, and how to fix it.
func (p *Persona) check() error {
	var errs []error
	if !ValidName(p.Name) {
		errs = append(errs, fmt.Errorf("name %q: use lower-case letters, digits, '-' and '_' (set name: in the front matter, or rename the file)", p.Name))
	}
	if p.Preamble == "" {
		errs = append(errs, errors.New("no preamble: write who the agent is below the front matter"))
	}
	if p.ReasoningEffort != "" && !slices.Contains(Efforts, p.ReasoningEffort) {
		errs = append(errs, fmt.Errorf("reasoning_effort %q: use low, medium or high", p.ReasoningEffort))
	}
	if p.MaxRetries != nil && *p.MaxRetries < 0 {
		errs = append(errs, fmt.Errorf("max_retries %d: use 0 or more", *p.MaxRetries))
	}
	if p.Element != "" && !ValidElement(p.Element) {
		errs = append(errs, fmt.Errorf("element %q: use one of %s", p.Element, strings.Join(Elements(), ", ")))
	}
	if _, ok := Positions[p.Position]; p.Position != "" && !ok {
		errs = append(errs, fmt.Errorf("position %q: use PG (point guard, backcourt), C (center) or PF (power forward, both frontcourt) or SG (shooting guard, paint)", p.Position))
	}
	if p.Zone != "" && !ValidName(p.Zone) {
		errs = append(errs, fmt.Errorf("zone %q: name the home zone as the graph's zone attribute does, a word such as frontcourt (letters, digits, '-' and '_')", p.Zone))
	}
	if p.Fidelity != "" {
		if _, err := fidelity.ParseMode(p.Fidelity); err != nil {
			errs = append(errs, fmt.Errorf("fidelity: %w", err))
		}
	}
	return errors.Join(errs...)
}

// splitFrontMatter separates a leading "---" YAML block from the body.
func splitFrontMatter(data []byte) (head, body []byte, err error) {
	data = bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n"))
	rest, ok := bytes.CutPrefix(data, []byte("---\n"))
	if !ok {
		return nil, data, nil
	}
	if h, b, ok := bytes.Cut(rest, []byte("\n---\n")); ok {
		return h, b, nil
	}
	if h, ok := bytes.CutSuffix(bytes.TrimRight(rest, "\n"), []byte("\n---")); ok {
		return h, nil, nil
	}
	return nil, nil, errors.New("front matter opened with --- is never closed: end it with a line holding only ---")
}

// LoadDir reads every *.md file in dir as a persona. A missing dir holds
// none. Two files naming the same persona, a file that does not parse, a
// link or a non-regular file is an error naming the file.
func LoadDir(dir string) ([]*Persona, error) {
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("personas: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("personas: %s is not a directory (a symbolic link is not followed): make it a folder of NAME.md files", dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("personas: %w", err)
	}
	var out []*Persona
	from := map[string]string{}
	for _, e := range entries {
		if e.IsDir() || !strings.EqualFold(filepath.Ext(e.Name()), ".md") {
			continue
		}
		if len(out) == MaxFiles {
			return nil, fmt.Errorf("personas: %s holds more than %d persona files", dir, MaxFiles)
		}
		path := filepath.Join(dir, e.Name())
		data, err := readRegular(path)
		if err != nil {
			return nil, fmt.Errorf("persona %s: %w", path, err)
		}
		p, err := Parse(path, data)
		if err != nil {
			return nil, err
		}
		if prev, dup := from[p.Name]; dup {
			return nil, fmt.Errorf("persona %s: %s already defines persona %q: keep one of them", path, prev, p.Name)
		}
		from[p.Name] = path
		out = append(out, p)
	}
	return out, nil
}

// Load is the built-in catalogue overridden by the personas in dir ("" for
// none).
func Load(dir string) (*Catalog, error) {
	if dir == "" {
		return Builtin(), nil
	}
	ps, err := LoadDir(dir)
	if err != nil {
		return nil, err
	}
	return Builtin().With(ps...), nil
}

// readRegular reads path if it is a regular file (not through a link) of at
// most MaxFileBytes.
func readRegular(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, errors.New("is a symbolic link, which is not followed: put the file itself there")
		}
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, errors.New("is not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("is larger than %d bytes: a preamble should be a few paragraphs", MaxFileBytes)
	}
	return data, nil
}
