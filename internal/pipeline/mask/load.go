package mask

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"gopkg.in/yaml.v3"
)

// File is a masks file (the CLI's --masks FILE): the `masks:` section of
// nanohost.yaml on its own, so a definition can be copied between them.
type File struct {
	Masks map[string]Mask `yaml:"masks"`
}

// Parse reads a masks file strictly (a misspelt key is an error with its
// line) and checks every mask.
func Parse(name string, data []byte) (Set, error) {
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("masks %s: %w (keys of a mask: title, description, nodes, classes, mounts, skills, context, preamble)", name, err)
	}
	if len(f.Masks) == 0 {
		return nil, fmt.Errorf("masks %s: %w", name, ErrNoMasks)
	}
	s := FromMap(f.Masks)
	var errs []error
	for _, p := range s.Check() {
		errs = append(errs, p)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("masks %s: %w", name, err)
	}
	return s, nil
}

// LoadFile reads and checks a masks file.
func LoadFile(path string) (Set, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("masks: %w", err)
	}
	return Parse(path, data)
}
