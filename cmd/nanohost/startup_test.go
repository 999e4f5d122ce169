package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Commands that lay nothing out pay nothing for Graphviz, syntax
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
	demo := filepath.Join("..", "..", "examples", "demo.dot")
	for _, args := range [][]string{{"--help"}, {"pipeline", "validate", demo}, {"pipeline", "parse", demo}} {
		cache := t.TempDir()
		cmd := exec.Command(nanohostBin, args...)
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
		if seen != len(heavy) {
			t.Errorf("nanohost %v: found %d of %v in the init trace (renamed? then update this test)", args, seen, heavy)
		}
		if _, err := os.Stat(filepath.Join(cache, "nanohost", "graphviz")); !os.IsNotExist(err) {
			t.Errorf("nanohost %v made Graphviz's compiled-code cache (%v): it compiled Graphviz", args, err)
		}
	}
}
