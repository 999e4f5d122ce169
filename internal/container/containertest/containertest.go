// Package containertest gives tests a real Docker engine and the test agent
// image (scripts/test-image.sh), built once per test binary. Without an
// engine the tests skip with a loud message — or fail, when the environment
// says NANOHOST_REQUIRE_DOCKER=1 (CI machines that must run them).
package containertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"nanohost/internal/testkit"
)

// Image is the test agent image: FROM scratch, static nanoagent and busybox.
// NANOHOST_TEST_IMAGE names another tag (scripts/test-image.sh honours it
// too), so checkouts that build different agents can test side by side.
var Image = imageName()

func imageName() string {
	if name := os.Getenv("NANOHOST_TEST_IMAGE"); name != "" {
		return name
	}
	return "nanohost-agent:test"
}

var (
	once     sync.Once
	setupErr error
	skipMsg  string
)

// Require makes sure the local engine answers and the test image is built
// (once per test binary). Without an engine it skips the test loudly — or
// fails it under NANOHOST_REQUIRE_DOCKER=1.
func Require(tb testing.TB) {
	tb.Helper()
	once.Do(setup)
	if skipMsg != "" {
		unavailable(tb, skipMsg)
	}
	if setupErr != nil {
		tb.Fatalf("building the test agent image: %v", setupErr)
	}
}

func setup() {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = cli.Ping(ctx)
		cancel()
		cli.Close()
	}
	if err != nil {
		skipMsg = err.Error()
		// Once per test binary on stderr too: `go test -v` shows the skips,
		// this shows up in streamed output without -v.
		fmt.Fprintln(os.Stderr, banner(skipMsg))
		return
	}
	setupErr = BuildImage()
}

func banner(why string) string {
	return fmt.Sprintf("\n%s\n  DOCKER TESTS NOT RUN: no usable Docker engine (%s).\n"+
		"  These tests cover the agent containers; set NANOHOST_REQUIRE_DOCKER=1 to make this a failure.\n%s",
		strings.Repeat("*", 78), why, strings.Repeat("*", 78))
}

func unavailable(tb testing.TB, why string) {
	tb.Helper()
	msg := banner(why)
	testkit.Missing(tb, "NANOHOST_REQUIRE_DOCKER", msg)
}

// BuildImage runs scripts/test-image.sh (a no-op when the image is current).
func BuildImage() error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(root, "scripts", "test-image.sh"), Image)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("scripts/test-image.sh: %w\n%s", err, out)
	}
	return nil
}

// RepoRoot is the directory holding go.mod.
func RepoRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("cannot locate the repository")
	}
	dir := filepath.Dir(file)
	for {
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

// Workspace returns a temporary workspace the agent user (uid 1000) can write.
func Workspace(tb testing.TB) string {
	tb.Helper()
	dir := tb.TempDir()
	if os.Geteuid() == 0 {
		if err := os.Chown(dir, 1000, 1000); err != nil {
			tb.Fatal(err)
		}
	}
	return dir
}
