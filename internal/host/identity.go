package host

import (
	"path/filepath"

	"nanohost/internal/pipeline/frontend"
	"nanohost/internal/pipeline/mask"
	"nanohost/internal/pipeline/persona"
)

// PersonasDir is the folder in a group's workspace holding its custom
// personas (NAME.md), which override the built-in ones of the same name.
const PersonasDir = "personas"

// identities are what a group's pipelines may name: its personas/ folder
// over the built-in personas, and the configured masks.
type identities struct {
	personas *persona.Catalog
	masks    mask.Set
}

// identitiesFor loads the group's personas (read afresh for every run, so
// a new persona file needs no restart). A broken persona file is an error
// that names it.
func (h *Host) identitiesFor(group string) (identities, error) {
	personas, err := persona.Load(filepath.Join(h.GroupDir(group), PersonasDir))
	if err != nil {
		return identities{}, err
	}
	return identities{personas: personas, masks: h.cfg.MaskSet()}, nil
}

// frontendOptions validate a group's pipelines against the handler types
// this host's engine knows and the group's personas and masks; goal, when
// set, replaces the pipeline's own.
func (h *Host) frontendOptions(group, goal string) (frontend.Options, error) {
	ids, err := h.identitiesFor(group)
	if err != nil {
		return frontend.Options{}, err
	}
	return frontend.Options{KnownTypes: h.registry.KnownTypes(), Goal: goal, Personas: ids.personas, Masks: ids.masks}, nil
}
