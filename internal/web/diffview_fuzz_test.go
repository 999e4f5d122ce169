package web

import (
	"slices"
	"testing"
)

// Any bytes parse without a panic, and no hunk holds more lines than its
// header announced.
func FuzzParseSection(f *testing.F) {
	f.Add([]byte("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n\\ No newline at end of file\n"))
	f.Add([]byte("@@ -0,0 +1 @@\n+x\n@@ -5,1 +6,0 @@ func f()\n-gone\n"))
	f.Add([]byte("@@ -1,99999999999 +1,1 @@\n-\n"))
	f.Add([]byte("Binary files /dev/null and b/app.bin differ\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		fd := ParseSection(data)
		for _, h := range fd.Hunks {
			var o, n int
			for _, l := range h.Lines {
				if !slices.Contains([]byte(" +-"), l.Op) {
					t.Fatalf("line op %q", l.Op)
				}
				if l.Op != '+' {
					o++
				}
				if l.Op != '-' {
					n++
				}
			}
			if o > h.OldLines || n > h.NewLines {
				t.Fatalf("hunk %+v holds %d old and %d new lines", h, o, n)
			}
		}
	})
}
