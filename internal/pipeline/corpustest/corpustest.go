// Package corpustest finds the external corpus of other Attractor projects'
// pipelines (../shared/attractor-corpus next to the repository; never copied
// into it) for the front end's robustness tests. Without the corpus the tests
// skip — or fail, when the environment says NANOHOST_REQUIRE_CORPUS=1 (CI,
// whose clean clone has the corpus next to it).
package corpustest

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"nanohost/internal/testkit"
)

// Dir returns the corpus directory, located from the module root (not the
// test's working directory), or skips/fails the test when it is missing.
func Dir(tb testing.TB) string {
	tb.Helper()
	return dirOrStop(tb, locate)
}

func dirOrStop(tb testing.TB, find func() (string, error)) string {
	tb.Helper()
	dir, err := find()
	if err == nil {
		return dir
	}
	testkit.Missing(tb, "NANOHOST_REQUIRE_CORPUS",
		fmt.Sprintf("SKIPPING corpus test: the Attractor corpus is missing: %v; set NANOHOST_REQUIRE_CORPUS=1 to make this a failure", err))
	return ""
}

// Files returns every pipeline in the corpus: the .dot files and the
// DOT-syntax .fabro files, sorted. An empty corpus fails the test.
func Files(tb testing.TB) []string {
	tb.Helper()
	var files []string
	err := filepath.WalkDir(Dir(tb), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && (strings.HasSuffix(p, ".dot") || strings.HasSuffix(p, ".fabro")) {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		tb.Fatalf("walk the corpus: %v", err)
	}
	if len(files) == 0 {
		tb.Fatal("the corpus has no .dot or .fabro files")
	}
	return files
}

// locate finds <module root>/../shared/attractor-corpus.
func locate() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, "..", "shared", "attractor-corpus")
	info, err := os.Stat(dir)
	if err != nil {
		return "", err
	}
	if !info.IsDir() {
		return "", fmt.Errorf("%s is not a directory", dir)
	}
	return dir, nil
}

// moduleRoot is the directory holding go.mod, found from this source file.
func moduleRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		return "", fmt.Errorf("cannot locate the module root from %q (built with -trimpath?)", file)
	}
	for dir := filepath.Dir(file); ; {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above %s", filepath.Dir(file))
		}
		dir = parent
	}
}
