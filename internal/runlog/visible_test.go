package runlog

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestVisibleEscapesWhatWouldDriveATerminal(t *testing.T) {
	for in, want := range map[string]string{
		"plain text, ✓ and 日本":                  "plain text, ✓ and 日本",
		"two\nlines\tand a tab":                 "two\nlines\tand a tab",
		"\x1b]0;pwned\a\x1b[2J\x1b[31mred":      `\x1b]0;pwned\x07\x1b[2J\x1b[31mred`,
		"cr\roverwrites, \x7f and \x01":         `cr\x0doverwrites, \x7f and \x01`,
		"c1 \u009b31m csi":                      `c1 \u009b31m csi`,
		"name\u202egnp.exe and \u2066iso\u2069": `name\u202egnp.exe and \u2066iso\u2069`,
		"bad \xff\x9b bytes":                    `bad \xff\x9b bytes`,
	} {
		if got := Visible(in); got != want {
			t.Errorf("Visible(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzVisible(f *testing.F) {
	f.Add("\x1b]0;pwned\a\x1b[2J\x1b[31m")
	f.Add("a\u202eb\xff\n\t")
	f.Fuzz(func(t *testing.T, s string) {
		v := Visible(s)
		if !utf8.ValidString(v) {
			t.Fatalf("Visible(%q) = %q is not UTF-8", s, v)
		}
		for _, r := range v {
			if hidden(r) {
				t.Fatalf("Visible(%q) = %q still holds %U", s, v, r)
			}
		}
		if Visible(v) != v {
			t.Fatalf("Visible is not idempotent on %q", s)
		}
		if !needsEscape(s) && v != s {
			t.Fatalf("clean %q changed to %q", s, v)
		}
		if strings.Count(v, "\n") != strings.Count(s, "\n") {
			t.Fatalf("newlines changed: %q → %q", s, v)
		}
	})
}
