package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	mdLink        = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	backtickedUp  = regexp.MustCompile("`(\\.\\./[^`\\s]+)`")
	linkWithProto = regexp.MustCompile(`^[a-z]+:`)
)

// Issue 30, item 14: the documentation a newcomer reads (README, docs/,
// skills/) links only files inside the repository — a clone has nothing
// beside it.
func TestDocsLinkOnlyFilesInTheRepository(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, pattern := range []string{"*.md", "docs/*.md", "skills/*/*.md", "skills/*/*/*.md"} {
		m, _ := filepath.Glob(filepath.Join(root, pattern))
		files = append(files, m...)
	}
	if len(files) < 5 {
		t.Fatalf("found only %d documents under %s", len(files), root)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, f)
		var targets []string
		for _, m := range mdLink.FindAllStringSubmatch(string(data), -1) {
			targets = append(targets, m[1])
		}
		for _, m := range backtickedUp.FindAllStringSubmatch(string(data), -1) {
			targets = append(targets, m[1])
		}
		for _, target := range targets {
			if linkWithProto.MatchString(target) || strings.HasPrefix(target, "#") {
				continue
			}
			path := strings.SplitN(target, "#", 2)[0]
			abs := filepath.Clean(filepath.Join(filepath.Dir(f), path))
			if r, err := filepath.Rel(root, abs); err != nil || strings.HasPrefix(r, "..") {
				t.Errorf("%s links %s, outside the repository", rel, target)
				continue
			}
			// A path that climbs out of its document's folder is where a
			// link to something beside the clone hides: it must be in it.
			if _, err := os.Stat(abs); err != nil && strings.HasPrefix(target, "../") {
				t.Errorf("%s links %s, which is not in the repository", rel, target)
			}
		}
	}
}
