package main

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// renderSVG runs `nanohost pipeline render --format svg` on the bundled demo
// with the given TMPDIR and cache directory (XDG_CACHE_HOME).
func renderSVG(t *testing.T, tmp, cache string) (string, error) {
	t.Helper()
	cmd := exec.Command(nanohostBin, "pipeline", "render", "--format", "svg", filepath.Join("..", "..", "examples", "demo.dot"))
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "XDG_CACHE_HOME="+cache)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Graphviz's compiled code is cached where only this user can reach it: a
// go-graphviz cache planted in a shared TMPDIR (here: garbage under every
// name the real cache uses, which go-graphviz alone would load — and panic
// on, or run) is never read, and nothing is written there.
func TestGraphvizCacheInASharedTMPDIRIsNeverRead(t *testing.T) {
	cache := t.TempDir()
	if out, err := renderSVG(t, t.TempDir(), cache); err != nil || !strings.Contains(out, "<svg") {
		t.Fatalf("render: %v\n%.500s", err, out)
	}
	private := filepath.Join(cache, "nanohost", "graphviz")
	if fi, err := os.Stat(private); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("the compiled-code cache %s: %v %v, want a 0700 directory", private, fi, err)
	}
	shared := t.TempDir()
	planted := 0
	err := filepath.WalkDir(private, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(private, path)
		dst := filepath.Join(shared, rel)
		planted++
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.WriteFile(dst, []byte(strings.Repeat("planted by another user ", 4096)), 0o644)
	})
	if err != nil || planted == 0 {
		t.Fatalf("planting a cache: %v (%d files)", err, planted)
	}
	before := treeOf(t, shared)
	out, err := renderSVG(t, shared, t.TempDir())
	if err != nil || !strings.Contains(out, "<svg") {
		t.Fatalf("with a cache planted in TMPDIR: %v\n%.500s", err, out)
	}
	if after := treeOf(t, shared); after != before {
		t.Errorf("TMPDIR changed:\nbefore %s\nafter  %s", before, after)
	}
}

// A cache directory that is not the user's own is not used: the code is
// compiled in a throwaway private directory, which is removed again.
func TestGraphvizCacheOwnedBySomeoneElseIsNotUsed(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to give a directory to another user")
	}
	cache := t.TempDir()
	theirs := filepath.Join(cache, "nanohost", "graphviz")
	if err := os.MkdirAll(theirs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(theirs, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	if out, err := renderSVG(t, tmp, cache); err != nil || !strings.Contains(out, "<svg") {
		t.Fatalf("render: %v\n%.500s", err, out)
	}
	if got := treeOf(t, theirs); got != "" {
		t.Errorf("wrote into another user's directory: %s", got)
	}
	if got := treeOf(t, tmp); got != "" {
		t.Errorf("left behind in TMPDIR: %s", got)
	}
}

// treeOf lists every path under dir with its size, "" for an empty tree.
func treeOf(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		info, _ := d.Info()
		rel, _ := filepath.Rel(dir, path)
		b.WriteString(rel)
		if info != nil && !d.IsDir() {
			b.WriteString("=" + info.ModTime().String())
		}
		b.WriteString(" ")
		return nil
	})
	return b.String()
}
