package host

import (
	"path/filepath"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/frontend"
	"nanohost/internal/pipeline/lint"
	"nanohost/internal/pipeline/mask"
	"nanohost/internal/pipeline/persona"
	"nanohost/internal/runs"
)

// PersonasDir is the folder in a group's workspace holding its custom
// personas (NAME.md), which override the built-in ones of the same name.
const PersonasDir = "personas"

// frontEnd validates and loads a group's pipelines: against the handler
// types this host's engine knows, the group's personas (its personas/
// folder over the built-in ones, read afresh for every run so a new persona
// file needs no restart) and the configured masks.
type frontEnd struct {
	registry *engine.Registry
	folders  groupFolders
	masks    mask.Set
	// pipelineDirs are where a group's sub-pipelines (pipeline="name") are
	// found: its stored pipelines' directories (nil: its workspace).
	pipelineDirs func(group string) []string
	// providers are the llm_provider values runtime.agents serves (nil:
	// any), hooks those whose agent runs tool_hooks (config.Runtime).
	providers, hooks []string
}

// identities loads what a group's pipelines may name (runs.Identities). A
// broken persona file is an error that names it.
func (f frontEnd) identities(group string) (*persona.Catalog, mask.Set, error) {
	personas, err := persona.Load(filepath.Join(f.folders.dir(group), PersonasDir))
	if err != nil {
		return nil, nil, err
	}
	return personas, f.masks, nil
}

// options are the front end's options for group; goal, when set, replaces
// the pipeline's own.
func (f frontEnd) options(group, goal string) (frontend.Options, error) {
	personas, masks, err := f.identities(group)
	if err != nil {
		return frontend.Options{}, err
	}
	pipelineDirs := []string{f.folders.dir(group)}
	if f.pipelineDirs != nil {
		pipelineDirs = f.pipelineDirs(group)
	}
	return frontend.Options{KnownTypes: f.registry.KnownTypes(), Goal: goal, Personas: personas, Masks: masks,
		SchemaDirs: []string{f.folders.dir(group)}, PipelineDirs: pipelineDirs, Agents: &lint.Agents{Providers: f.providers, Hooks: f.hooks}}, nil
}

// load is the runs service's Loader.
func (f frontEnd) load(group, file string, src []byte, goal string) (*pipeline.Graph, []pipeline.Diagnostic, error) {
	opts, err := f.options(group, goal)
	if err != nil {
		return nil, nil, err
	}
	return frontend.Prepare(file, src, opts)
}

var (
	_ runs.Loader     = frontEnd{}.load
	_ runs.Identities = frontEnd{}.identities
)
