package corpustest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// stopRecorder is a testing.TB that records Fatalf/Skipf instead of stopping.
type stopRecorder struct {
	testing.TB
	fatal, skip string
}

func (r *stopRecorder) Helper()                      {}
func (r *stopRecorder) Fatalf(f string, args ...any) { r.fatal = f }
func (r *stopRecorder) Skipf(f string, args ...any)  { r.skip = f }

func missing() (string, error) { return "", errors.New("no such directory") }

// CI sets NANOHOST_REQUIRE_CORPUS=1: a missing corpus must fail the test, not skip it.
func TestMissingCorpusFailsWhenRequired(t *testing.T) {
	for _, tt := range []struct {
		env       string
		wantFatal bool
	}{{"1", true}, {"yes", true}, {"", false}, {"0", false}} {
		t.Setenv("NANOHOST_REQUIRE_CORPUS", tt.env)
		r := &stopRecorder{}
		dirOrStop(r, missing)
		if (r.fatal != "") != tt.wantFatal || (r.skip != "") == tt.wantFatal {
			t.Errorf("NANOHOST_REQUIRE_CORPUS=%q: fatal %q, skip %q", tt.env, r.fatal, r.skip)
		}
	}
}

// The corpus is found from the module root whatever the working directory.
func TestCorpusFoundFromModuleRootNotCwd(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil || !strings.HasPrefix(string(mod), "module nanohost\n") {
		t.Fatalf("module root %s: %v", root, err)
	}
	t.Chdir(t.TempDir())
	files := Files(t) // skips (or fails under NANOHOST_REQUIRE_CORPUS) without the corpus
	want := filepath.Join(root, "..", "shared", "attractor-corpus")
	if !strings.HasPrefix(files[0], want+string(filepath.Separator)) {
		t.Errorf("first file %s is not under %s", files[0], want)
	}
}
