package didyoumean

import (
	"strings"
	"testing"
)

func TestClosest(t *testing.T) {
	keys := []string{"prompt", "max_retries", "llm_model", "label", "timeout", "type"}
	cases := map[string]string{
		"promt":       "prompt",      // deletion
		"pormpt":      "prompt",      // transposition is one edit
		"max_retry":   "max_retries", // three edits on a long word
		"LLM_Model":   "llm_model",   // case does not count
		"timeuot":     "timeout",
		"tpye":        "type",
		"colour":      "", // nothing near: no guess beats a wrong guess
		"x":           "",
		"custom_attr": "",
	}
	for in, want := range cases {
		if got := Closest(in, keys); got != want {
			t.Errorf("Closest(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"abc", "", 3}, {"kitten", "sitting", 3}, {"ab", "ba", 1}, {"résumé", "resume", 2}} {
		if got := Distance(c.a, c.b); got != c.d {
			t.Errorf("Distance(%q, %q) = %d, want %d", c.a, c.b, got, c.d)
		}
	}
}

// The index's filters only skip what could not be near enough: it picks
// what comparing with every candidate picks.
func FuzzIndexAgreesWithEveryComparison(f *testing.F) {
	keys := []string{"prompt", "max_retries", "llm_model", "label", "timeout", "type", "Ünïcode", "日本語"}
	f.Add("promt")
	f.Add("ÜNÏCODE_")
	f.Add("日本")
	f.Fuzz(func(t *testing.T, word string) {
		w := strings.ToLower(word)
		want, bestDist := "", -1
		for _, c := range keys {
			d := Distance(w, strings.ToLower(c))
			if d <= threshold(w, c) && (bestDist < 0 || d < bestDist) {
				want, bestDist = c, d
			}
		}
		if got := NewIndex(keys).Closest(word); got != want {
			t.Fatalf("Closest(%q) = %q, comparing with every candidate gives %q", word, got, want)
		}
	})
}
