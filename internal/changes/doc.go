// Package changes records what each pipeline stage changed in its group's
// workspace: the files added, modified and deleted, with sizes, and a
// bounded unified diff of the text files.
//
// It sits next to the agent backend, never inside the engine: Tracker.Wrap
// decorates an engine.Backend so that every agent or tool stage is bracketed
// by two snapshots of the workspace, and the difference is written to the
// stage directory (changes.json, changes.diff) and summarised on the
// engine.Result for the run's events.
//
// Nothing from the workspace is executed or trusted. There is no git: an
// agent's .git (its config, hooks, fsmonitor, filters, attributes and
// ignore files) is never read, and .git directories are left out of the
// snapshot. The walk opens every directory and file relative to its parent,
// refusing symbolic links on the way (a link is recorded with its target,
// never followed), reads only regular files, never blocks on a FIFO, and
// bounds the entries, depth, bytes hashed, bytes diffed and diff sizes.
//
// A snapshot is a map of path → (type, mode, size, mtime, ctime, inode,
// SHA-256). A file whose size, times and inode are those of the previous
// snapshot is not read again (ctime cannot be set by an agent, so restoring
// an mtime does not hide a change); files changed within the timestamp
// granularity of a scan are read again next time. The content of text files
// up to Limits.MaxTextBytes is kept in a content-addressed object store in
// the host's state directory, outside every mount, so the next stage's diff
// has the "before" side. See docs/semantics.md for how changes are
// attributed when stages overlap in time.
package changes
