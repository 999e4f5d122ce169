// Package browsertest gives tests a real headless Chromium (chromedp) and a
// place for their screenshots: the dashboard's browser tests and the
// rendered graphs checked as a browser draws them.
package browsertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"nanohost/internal/testkit"
)

// FindChromium returns the browser to drive: $NANOHOST_CHROMIUM, else the
// first of the usual names on PATH. When none is there it runs
// scripts/install-chromium.sh (Debian's chromium) once. It fails the test
// when NANOHOST_REQUIRE_BROWSER=1 (CI) and still no browser exists, and
// skips loudly otherwise.
func FindChromium(t testing.TB) string {
	t.Helper()
	look := func() string {
		if p := os.Getenv("NANOHOST_CHROMIUM"); p != "" {
			return p
		}
		for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
			if p, err := exec.LookPath(name); err == nil {
				return p
			}
		}
		return ""
	}
	if p := look(); p != "" {
		return p
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(repoRoot(t), "scripts", "install-chromium.sh")).CombinedOutput()
	if p := look(); p != "" {
		t.Logf("installed %s with scripts/install-chromium.sh", p)
		return p
	}
	msg := fmt.Sprintf("no Chromium for the browser test, and scripts/install-chromium.sh could not install it (%v):\n%s", err, tail(out, 2000))
	if !testkit.Required("NANOHOST_REQUIRE_BROWSER") {
		fmt.Fprintln(os.Stderr, "\n**** SKIPPING a browser test: "+msg+"\n**** Set NANOHOST_REQUIRE_BROWSER=1 to make this a failure.")
	}
	testkit.Missing(t, "NANOHOST_REQUIRE_BROWSER", msg)
	return ""
}

// repoRoot is the directory holding go.mod, above the test's package.
func repoRoot(t testing.TB) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// ArtifactDir is where screenshots go: $NANOHOST_ARTIFACTS/sub, else a
// temporary directory kept for the test's log.
func ArtifactDir(t testing.TB, sub string) string {
	t.Helper()
	dir := filepath.Join(os.Getenv("NANOHOST_ARTIFACTS"), sub)
	if os.Getenv("NANOHOST_ARTIFACTS") == "" {
		var err error
		if dir, err = os.MkdirTemp("", "nanohost-"+sub+"-screenshots-"); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// New starts headless Chromium; the returned context drives one tab of
// 1280×900 and ends with the test.
func New(t testing.TB, chromium string) context.Context {
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.NoSandbox, // root in a container
		chromedp.DisableGPU,
		chromedp.WindowSize(1280, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 4*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancelTab(); cancelAlloc() })
	return ctx
}
