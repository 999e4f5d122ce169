package persona

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
}

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
			return nil, fmt.Errorf("persona %s: front matter: %w (keys: name, title, description, llm_model, reasoning_effort, max_retries, fidelity)", file, err)
		}
	}
	p := &Persona{
		Name: Normalize(fm.Name), Title: strings.TrimSpace(fm.Title), Description: strings.TrimSpace(fm.Description),
		Preamble: strings.TrimSpace(string(body)), Model: strings.TrimSpace(fm.LLMModel),
		ReasoningEffort: Normalize(fm.ReasoningEffort), MaxRetries: fm.MaxRetries, Fidelity: strings.TrimSpace(fm.Fidelity),
		Source: file,
	}
	if p.Name == "" {
		p.Name = Normalize(strings.TrimSuffix(filepath.Base(file), filepath.Ext(file)))
	}
	if p.Title == "" {
		p.Title = strings.ToUpper(p.Name[:min(1, len(p.Name))]) + p.Name[min(1, len(p.Name)):]
	}
	if err := p.check(); err != nil {
		return nil, fmt.Errorf("persona %s: %w", file, err)
	}
	return p, nil
}

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
