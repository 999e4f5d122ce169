// Package workspace gives every pipeline run its own git branch and working
// tree, and records each stage as a commit on that branch.
//
// A group's history lives in a repository the host owns (data/state/
// workspaces/<group>.git), outside every directory an agent can write. A run
// starts from a base commit — a snapshot of the group's folder, or the HEAD
// of the repository given on the command line — on branch
// nanohost/<short run id>, checked out into a fresh directory that the run's
// agents see as /workspace. After an agent or tool stage, what changed in
// that directory becomes one commit on the branch, with trailers naming the
// run, node, attempt and persona.
//
// Nothing the agents write is interpreted by git on the host: the working
// tree is read by this package's own walk (os.Root: no symlink is followed,
// only regular files and links are read, .git entries are left out) and its
// objects are written with go-git, which runs no hooks, filters, fsmonitor
// or external diff. The git command is used only for what go-git lacks
// (a unified diff, a three-way merge) and only against the host's own git
// directory, with no system or global configuration and hooks off (see
// docs/workspaces.md).
package workspace
