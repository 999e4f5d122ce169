package dot

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"nanohost/internal/pipeline/corpustest"
)

// parseBothWays parses src with attribute lists and runs of simple
// statements handed to gographviz whole (as placeholders) and token by token, and fails unless both give the same
// graph or the same error.
func parseBothWays(t *testing.T, name string, src []byte) {
	t.Helper()
	lim := Limits{MaxBytes: 4 << 20, MaxNodes: 20000, MaxEdges: 100000, MaxDepth: 64}
	g1, err1 := ParseWithLimits(name, src, lim)
	collapseAttrLists, collapseStmts = false, false
	g2, err2 := ParseWithLimits(name, src, lim)
	collapseAttrLists, collapseStmts = true, true
	if (err1 == nil) != (err2 == nil) || (err1 != nil && err1.Error() != err2.Error()) {
		t.Fatalf("%s: with placeholders: %v; token by token: %v", name, err1, err2)
	}
	if !reflect.DeepEqual(g1, g2) {
		t.Fatalf("%s: the graphs differ:\n%+v\n%+v", name, g1, g2)
	}
}

var attrListCases = []string{
	`digraph G { a [x=1, y="two", z=3;] b [x=1;y=2] a -> b [label="go", weight=2] }`,
	`digraph G { a [x=1;;y=2] }`,       // two separators: gographviz's error
	`digraph G { a [;x=1] }`,           // leading ';'
	`digraph G { a [,x=1,,y=2,] }`,     // commas anywhere
	`digraph G { a [x] b [x=1 y] }`,    // valueless attributes
	`digraph G { a [] b [x=1] [y=2] }`, // empty and repeated lists
	`digraph G { a [bad-key=1] }`,
	`digraph G { a [x=1 -> b }`,
	`digraph G { a [x=1] -> b }`,
	`digraph G { node [shape=box] edge [weight=1] graph [goal="g"] a -> b -> c [label=x] }`,
	`digraph G { subgraph cluster_a { label="A"; node [class=c] a [x=1] } { b [y=2] } -> a }`,
	`digraph G { a [x="one" + "two", y=-3.5, z=gpt-5.2] }`,
	`digraph G { a [x=1 x=2] }`, // the last one wins
	// runs of simple statements
	`digraph G { a; b c -> d -> e [x=1]; f [y=2] g -> h; subgraph s { i -> j k } l -> {m n} o }`,
	`digraph G { a; -> b }`,
	`digraph G { a -> b = c }`,
	`digraph G { a -> b c = d e }`,
	`digraph G { a [x=1] [y=2] b }`,
	`digraph G { a -> b [x=1] -> c }`,
	`digraph G { a -> node }`,
	`digraph G { "q r" -> b }`,
	`digraph G { a -> b [bad-key=1] }`,
	`digraph G { node [k=v] edge [w=1] a -> b -> c; d }`,
	`digraph G { a b [x=1`,
	`digraph G { a b`,
	`digraph G { a; b; }`,
	`digraph G { a -> b; a -> b }`,
}

func TestAttrListPlaceholdersParseLikeTokens(t *testing.T) {
	for i, src := range attrListCases {
		parseBothWays(t, "case"+strconv.Itoa(i), []byte(src))
	}
	seeds, _ := filepath.Glob("testdata/fuzz/FuzzParse/*")
	for _, f := range seeds {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		line := strings.TrimSpace(strings.SplitN(string(data), "\n", 2)[1])
		src, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(line, "[]byte("), ")"))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		parseBothWays(t, filepath.Base(f), []byte(src))
	}
	parseBothWays(t, "generated", generatePipeline(300))
}

func TestAttrListPlaceholdersParseTheCorpusLikeTokens(t *testing.T) {
	for _, f := range corpustest.Files(t) {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		parseBothWays(t, filepath.Base(f), src)
	}
}

func FuzzAttrListPlaceholders(f *testing.F) {
	for _, src := range attrListCases {
		f.Add([]byte(src))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		if len(src) > 64<<10 {
			return
		}
		parseBothWays(t, "fuzz.dot", src)
	})
}
