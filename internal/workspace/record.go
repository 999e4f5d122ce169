package workspace

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"

	"nanohost/internal/pipeline/engine"
)

// maxDiff bounds the diff a record keeps; the files past it are listed
// without their diff (git show on the branch has it all).
const maxDiff = 8 << 20

// Diff is the change set between two commits, as git diff-tree tells it:
// the files, and git's unified diff, one section per file.
func (run *Run) Diff(ctx context.Context, from, to plumbing.Hash) ([]Change, []byte, error) {
	raw, err := run.repo.git(ctx, nil, "diff-tree", "-r", "-z", "--no-renames", "--raw", "--no-abbrev", from.String(), to.String())
	if err != nil {
		return nil, nil, err
	}
	patch, err := run.repo.git(ctx, nil, "diff-tree", "-r", "-p", "--no-renames", "--no-ext-diff", "--no-textconv", "--no-color", from.String(), to.String())
	if err != nil {
		return nil, nil, err
	}
	list := parseRaw(raw)
	sections := splitPatch(patch)
	var diff []byte
	for i := range list {
		c := &list[i]
		c.Bytes = run.size(c.newHash)
		if c.Change.Change == Modified {
			c.OldBytes = run.size(c.oldHash)
		}
		if i >= len(sections) {
			continue
		}
		sec := sections[i]
		c.LinesAdded, c.LinesDeleted, c.Binary = countLines(sec)
		if c.Binary {
			c.NoDiff = NoDiffBinary
		}
		if len(diff)+len(sec) > maxDiff {
			c.NoDiff = NoDiffStageLimit
			continue
		}
		c.DiffOffset, c.DiffBytes = int64(len(diff)), int64(len(sec))
		diff = append(diff, sec...)
	}
	out := make([]Change, len(list))
	for i, c := range list {
		out[i] = c.Change
	}
	return out, diff, nil
}

type rawChange struct {
	Change
	oldHash, newHash plumbing.Hash
}

// parseRaw reads `diff-tree --raw -z`: ":old new oldsha newsha S\0path\0".
func parseRaw(raw []byte) []rawChange {
	var out []rawChange
	fields := bytes.Split(raw, []byte{0})
	for i := 0; i+1 < len(fields); i += 2 {
		meta := strings.Fields(strings.TrimPrefix(string(fields[i]), ":"))
		if len(meta) < 5 {
			break
		}
		c := rawChange{Change: Change{Path: string(fields[i+1])}, oldHash: plumbing.NewHash(meta[2]), newHash: plumbing.NewHash(meta[3])}
		c.Kind, c.Mode = kindOf(meta[1]), meta[1]
		switch meta[4] {
		case "A":
			c.Change.Change = Added
		case "D":
			c.Change.Change, c.Kind, c.Mode = Deleted, kindOf(meta[0]), meta[0]
		default:
			c.Change.Change = Modified
			if meta[0] != meta[1] {
				c.OldMode = meta[0]
				if kindOf(meta[0]) != c.Kind {
					c.OldKind = kindOf(meta[0])
				}
			}
		}
		out = append(out, c)
	}
	return out
}

func kindOf(mode string) string {
	switch mode {
	case "120000":
		return "symlink"
	case "160000":
		return "submodule"
	}
	return "file"
}

func (run *Run) size(h plumbing.Hash) int64 {
	if h.IsZero() {
		return 0
	}
	run.repo.mu.Lock()
	defer run.repo.mu.Unlock()
	n, err := run.repo.st.EncodedObjectSize(h)
	if err != nil {
		return 0
	}
	return n
}

// splitPatch cuts a patch at its "diff --git" lines.
func splitPatch(p []byte) [][]byte {
	var out [][]byte
	start := -1
	for i := 0; i < len(p); {
		end := bytes.IndexByte(p[i:], '\n')
		if end < 0 {
			end = len(p) - i
		} else {
			end++
		}
		if bytes.HasPrefix(p[i:], []byte("diff --git ")) {
			if start >= 0 {
				out = append(out, p[start:i])
			}
			start = i
		}
		i += end
	}
	if start >= 0 {
		out = append(out, p[start:])
	}
	return out
}

// countLines counts a section's added and deleted lines.
func countLines(sec []byte) (added, deleted int, binary bool) {
	inHunk := false
	for _, line := range bytes.Split(sec, []byte("\n")) {
		switch {
		case bytes.HasPrefix(line, []byte("@@")):
			inHunk = true
		case !inHunk && bytes.HasPrefix(line, []byte("Binary files ")):
			binary = true
		case inHunk && len(line) > 0 && line[0] == '+':
			added++
		case inHunk && len(line) > 0 && line[0] == '-':
			deleted++
		}
	}
	return
}

// summary is the engine's view of a change list.
func summary(list []Change) *engine.WorkspaceChanges {
	w := &engine.WorkspaceChanges{ChangeCounts: CountChanges(list)}
	for _, c := range list {
		if len(w.Paths) == 8 {
			break
		}
		w.Paths = append(w.Paths, c.Path)
	}
	for _, c := range list {
		if c.NoDiff == NoDiffStageLimit {
			w.Truncated = true
		}
	}
	return w
}

// writeRecord writes a change set where the surfaces read it (changes.json
// and changes.diff in dir).
func writeRecord(dir string, list []Change, diff []byte) error {
	if err := WriteSet(dir, list, diff); err != nil {
		return fmt.Errorf("write the change record: %w", err)
	}
	return nil
}
