package refs

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

func TestExpand(t *testing.T) {
	ctx := map[string]string{"context.branch": "", "branch": "fix/save", "review.confidence": "0.87", "empty": ""}
	lookup := func(k string) (string, bool) { v, ok := ctx[k]; return v, ok }
	for _, tc := range []struct{ in, want, missing string }{
		{"on ${branch}", "on fix/save", ""},
		{"${review.confidence} and ${review.confidence}", "0.87 and 0.87", ""},
		{"${nope:-main} ${empty:-dflt} ${nope}", "main dflt ", "nope"},
		{"$goal and ${ spaced } ${a b} ${} ${x", "$goal and  ${a b} ${} ${x", "spaced"},
		{"no refs", "no refs", ""},
		{"${branch:-}", "fix/save", ""},
	} {
		got, missing, err := Expand(tc.in, lookup, nil, 1<<20)
		if err != nil || got != tc.want || strings.Join(missing, ",") != tc.missing {
			t.Errorf("Expand(%q) = %q, missing %v, %v; want %q, missing %q", tc.in, got, missing, err, tc.want, tc.missing)
		}
	}
}

func TestExpandRefusesAmplificationBeforeBuilding(t *testing.T) {
	big := strings.Repeat("x", 1<<16)
	text := strings.Repeat("${v}", 100_000) // 400 kB asking for 6.5 GB
	_, _, err := Expand(text, func(string) (string, bool) { return big, true }, ShellQuote, 16<<20)
	var tl *TooLargeError
	if !errors.As(err, &tl) || tl.Size < 6<<30 {
		t.Fatalf("err = %v, want a TooLargeError with the size it would have reached", err)
	}
}

func TestShellQuoteIsOneWord(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	for _, v := range []string{"x; touch /nonexistent/pwned", "it's", "$(id)", "`id`", "a\nb", "", "'\"\\", "*"} {
		out, err := exec.Command(sh, "-c", "printf '%s|' "+ShellQuote(v)).Output()
		if err != nil || string(out) != v+"|" {
			t.Errorf("ShellQuote(%q) through sh = %q, %v", v, out, err)
		}
	}
}

func FuzzScan(f *testing.F) {
	for _, s := range []string{"${a}", "${a:-b}", "${", "${}", "$${a}}", "${a.b.c:-${d}}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		refs, bad := Scan(text)
		for _, r := range refs {
			if r.Start < 0 || r.End > len(text) || !strings.HasPrefix(text[r.Start:], "${") || text[r.End-1] != '}' {
				t.Fatalf("ref %+v outside %q", r, text)
			}
		}
		for _, m := range bad {
			if m.Offset < 0 || m.Offset > len(text) {
				t.Fatalf("malformed %+v outside %q", m, text)
			}
		}
		out, _, err := Expand(text, func(k string) (string, bool) { return "v", true }, ShellQuote, 1<<20)
		if err == nil && len(refs) == 0 && out != text {
			t.Fatalf("text without references changed: %q → %q", text, out)
		}
	})
}
