package main

import (
	"debug/buildinfo"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Commands that lay nothing out (--help, validate, parse, a whole run on
// the simulated backend, config check) pay nothing for Graphviz, syntax
// highlighting or JSON Schema at start: go-graphviz's WebAssembly is
// compiled on the first layout, chroma's lexers are built on the first
// highlight and jsonschema's meta-schemas on the first schema compiled (all
// forks in third_party/), so none of these packages' initialisation
// allocates more than 64 KiB — upstream's allocate 4.4 MB, 2.7 MB and
// 1.7 MB — and nothing is compiled into the Graphviz cache. Allocations, not times: they do not depend on how
// busy the machine is.
func TestCommandsThatDoNotRenderPayNothingAtStart(t *testing.T) {
	heavy := []string{"github.com/goccy/go-graphviz/internal/wasm", "github.com/alecthomas/chroma/v2/lexers",
		"github.com/santhosh-tekuri/jsonschema/v6"}
	// Forked to have no init at all, so it is absent from the trace when all is well.
	heavy = append(heavy, "github.com/awalterschulze/gographviz/internal/parser")
	const withInit = 3
	demo, err := filepath.Abs(filepath.Join("..", "..", "examples", "demo.dot"))
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--help"}, {"pipeline", "validate", demo}, {"pipeline", "parse", demo},
		{"pipeline", "run", demo, "--backend", "sim", "--auto-approve"}, {"config", "check"}} {
		cache := t.TempDir()
		cmd := exec.Command(nanohostBin, args...)
		cmd.Dir = t.TempDir() // a run writes its directory here
		cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1", "XDG_CACHE_HOME="+cache)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("nanohost %v: %v\n%s", args, err, stderr.String())
		}
		seen := 0
		for _, line := range strings.Split(stderr.String(), "\n") {
			f := strings.Fields(line) // init PKG @T ms, C ms clock, B bytes, A allocs
			if len(f) < 8 || f[0] != "init" {
				continue
			}
			for _, pkg := range heavy {
				if f[1] != pkg {
					continue
				}
				seen++
				if b, _ := strconv.Atoi(f[7]); b > 64<<10 {
					t.Errorf("nanohost %v: %s allocates %d bytes at start, want at most 64 KiB", args, pkg, b)
				}
			}
		}
		if seen < withInit {
			t.Errorf("nanohost %v: found %d of %v in the init trace (renamed? then update this test)", args, seen, heavy[:withInit])
		}
		if _, err := os.Stat(filepath.Join(cache, "nanohost", "graphviz")); !os.IsNotExist(err) {
			t.Errorf("nanohost %v made Graphviz's compiled-code cache (%v): it compiled Graphviz", args, err)
		}
	}
}

// The lean front (`go build -tags lean`, lean.go) starts like a small Go
// program — it links none of what only serve, run and runs use, and its
// packages' initialisation allocates little — and is otherwise the same
// nanohost: its help and the commands it has print what the full binary's
// do, and every other command is the full binary's, handed over with its
// arguments, standard input and exit status. Without nanohost-full beside it,
// a handed-over command says what is missing.
func TestLeanFrontStartsLikeAGoCLIAndHandsTheRestOver(t *testing.T) {
	dir := t.TempDir()
	lean := filepath.Join(dir, "nanohost")
	if out, err := exec.Command("go", "build", "-tags", "lean", "-o", lean, ".").CombinedOutput(); err != nil {
		t.Fatalf("build the lean front: %v\n%s", err, out)
	}
	info, err := buildinfo.ReadFile(lean)
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range info.Deps {
		for _, heavy := range []string{"k8s.io/", "github.com/docker/", "github.com/prometheus/", "github.com/jackc/pgx",
			"github.com/mattn/go-sqlite3", "github.com/goccy/go-graphviz", "github.com/tetratelabs/wazero",
			"github.com/alecthomas/chroma", "github.com/go-git/", "github.com/slack-go/"} {
			if strings.HasPrefix(dep.Path, heavy) {
				t.Errorf("the lean front links %s, which only the full binary's commands use", dep.Path)
			}
		}
	}
	// Its initialisation, in allocations (not time: the machine's load does not change them).
	cmd := exec.Command(lean, "--help")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var trace strings.Builder
	cmd.Stderr = &trace
	if err := cmd.Run(); err != nil {
		t.Fatalf("nanohost --help: %v\n%s", err, trace.String())
	}
	total := 0
	for _, line := range strings.Split(trace.String(), "\n") {
		if f := strings.Fields(line); len(f) >= 8 && f[0] == "init" {
			b, _ := strconv.Atoi(f[7])
			total += b
		}
	}
	if total > 256<<10 {
		t.Errorf("the lean front's packages allocate %d bytes at start, want at most 256 KiB (~130 KiB: compile regexps and build tables on first use, not in package init; the full binary: ~4 MB)", total)
	}

	// Beside the full binary, it answers as the full binary does.
	if err := os.Symlink(nanohostBin, filepath.Join(dir, "nanohost-full")); err != nil {
		t.Fatal(err)
	}
	demo, _ := filepath.Abs(filepath.Join("..", "..", "examples", "demo.dot"))
	broken := writeDOT(t, "broken.dot", "digraph G { start [shape=Mdiamond]; start -> nowhere }")
	demoSrc, err := os.ReadFile(demo)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		stdin string
		args  []string
	}{
		{"", nil},
		{"", []string{"--help"}},
		{"", []string{"pipeline", "validate", demo, "--json"}},
		{"", []string{"pipeline", "validate", broken}},
		{"", []string{"pipeline", "validate", "--strcit", demo}},
		{"", []string{"pipeline", "parse", demo}},
		{string(demoSrc), []string{"pipeline", "render", "-", "--format", "mermaid"}}, // handed over, stdin too
		{"", []string{"pipeline", "--help"}},
		{"", []string{"serve", "--help"}},
		{"", []string{"runs", "list", "--db", filepath.Join(dir, "none.db")}}, // exit 1
		{"", []string{"pipelin", "validate", demo}},                           // exit 2, did you mean
	} {
		want := runBinary(t, nanohostBin, c.stdin, c.args...)
		got := runBinary(t, lean, c.stdin, c.args...)
		if got != want {
			t.Errorf("nanohost %q: the lean front gave\n%+v\nthe full binary\n%+v\n(a new top-level command? list it in lean.go's init, its summary a constant in main.go)", c.args, got, want)
		}
	}

	// Without it, a command it does not have says what is missing.
	alone := filepath.Join(t.TempDir(), "nanohost")
	if err := os.Link(lean, alone); err != nil {
		if err := copyFile(lean, alone); err != nil {
			t.Fatal(err)
		}
	}
	res := runBinary(t, alone, "", "runs", "list")
	if res.code != 1 || !strings.Contains(res.stderr, "nanohost-full") || !strings.Contains(res.stderr, "scripts/build.sh") {
		t.Errorf("the lean front alone, `runs list`: %+v, want exit 1 naming nanohost-full and scripts/build.sh", res)
	}
}

func runBinary(t *testing.T, bin, stdin string, args ...string) cliResult {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = t.TempDir()
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %s %v: %v", bin, args, err)
	}
	return cliResult{stdout.String(), stderr.String(), code}
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o755)
}
