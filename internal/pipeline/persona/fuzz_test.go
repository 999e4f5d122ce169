package persona

import (
	"strings"
	"testing"
)

// A group's agents can write its personas/ folder: whatever is in a file,
// Parse returns a persona that passes its own checks, or an error naming
// the file — never a panic.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"---\ntitle: Triager\nreasoning_effort: low\nmax_retries: 1\nfidelity: compact\n---\nYou are the Triager.\n",
		"You are nobody in particular.",
		"---\nname: x\n---\n",
		"---\n---\n---\n",
		"---\nmax_retries: [1, 2]\n---\nbody",
		"---\r\ntitle: crlf\r\n---\r\nbody\r\n",
		"---\nfoo: &a [*a]\n---\nbody",
	} {
		f.Add("seed.md", seed)
	}
	f.Fuzz(func(t *testing.T, file, data string) {
		p, err := Parse(file, []byte(data))
		if err != nil {
			if !strings.Contains(err.Error(), file) {
				t.Fatalf("error %q does not name the file %q", err, file)
			}
			return
		}
		if err := p.check(); err != nil || !ValidName(p.Name) || p.Preamble == "" || p.Title == "" {
			t.Fatalf("Parse accepted an invalid persona %+v (%v)", p, err)
		}
	})
}
