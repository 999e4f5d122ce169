package main

// --personas DIR and --masks FILE: the personas and masks a pipeline's
// nodes may name (internal/pipeline/persona, internal/pipeline/mask), for
// validate, run and resume — what a group's personas/ folder and
// nanohost.yaml's masks: are to the host.

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/pflag"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/frontend"
	"nanohost/internal/pipeline/mask"
	"nanohost/internal/pipeline/persona"
)

type identityFlags struct {
	personasDir string
	masksFile   string
}

func (f *identityFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.personasDir, "personas", "", "folder of custom personas `DIR/NAME.md` (markdown with YAML front matter; they override built-ins of the same name)")
	fs.StringVar(&f.masksFile, "masks", "", "masks nodes may wear, `FILE` in the form of nanohost.yaml's masks: section")
}

// identities are the loaded personas and masks.
type identities struct {
	personas *persona.Catalog
	masks    mask.Set
}

// load reads the flags' personas and masks (the built-in personas and no
// masks when the flags are unset).
func (f *identityFlags) load() (identities, error) {
	personas, err := persona.Load(f.personasDir)
	if err != nil {
		return identities{}, fmt.Errorf("--personas: %w", err)
	}
	var masks mask.Set
	if f.masksFile != "" {
		if masks, err = mask.LoadFile(f.masksFile); err != nil {
			return identities{}, fmt.Errorf("--masks: %w", err)
		}
	}
	return identities{personas: personas, masks: masks}, nil
}

// frontendOptions validate the pipeline in file against the engine's
// handler types and these personas and masks; its output_schema files are
// looked for beside it ("-", standard input, has no directory).
func (id identities) frontendOptions(file string) frontend.Options {
	opts := frontend.Options{KnownTypes: engine.BuiltinTypes(), Personas: id.personas, Masks: id.masks}
	if file != "" && file != "-" {
		opts.SchemaDirs = []string{filepath.Dir(file)}
	}
	return opts
}
