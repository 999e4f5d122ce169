package mask

import (
	"testing"

	"nanohost/internal/pipeline"
)

// Whatever a masks file holds, Parse returns masks that pass their own
// checks (and resolve without a panic) or an error.
func FuzzParse(f *testing.F) {
	f.Add(lightMasks)
	f.Add("masks:\n  x: {nodes: ['*'], mounts: ['/a:b:ro'], context: {k: v}}\n")
	f.Add("masks:\n  x:\n    nodes: [a]\n    mounts: [':', '::rw', '/a:../b']\n")
	f.Add("masks: [1, 2]\n")
	f.Fuzz(func(t *testing.T, data string) {
		s, err := Parse("fuzz.yaml", []byte(data))
		if err != nil {
			return
		}
		if ps := s.Check(); len(ps) > 0 {
			t.Fatalf("Parse accepted masks with problems: %v", ps)
		}
		for _, name := range s.Names() {
			m := s[name]
			for _, spec := range m.Mounts {
				if _, err := m.ParseMount(spec); err != nil {
					t.Fatalf("accepted mount %q does not parse: %v", spec, err)
				}
			}
			n := &pipeline.Node{ID: "a", Attrs: pipeline.Attrs{"masks": name}}
			_, _ = s.Resolve(n)
		}
	})
}
