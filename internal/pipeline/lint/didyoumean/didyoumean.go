// Package didyoumean finds the known word a misspelt one was probably meant
// to be, for "did you mean …?" fixes in diagnostics.
package didyoumean

import "strings"

// Closest returns the candidate nearest to word, or "" when none is near
// enough to be a plausible typo. Comparison ignores case; ties go to the
// earlier candidate so results are deterministic.
func Closest(word string, candidates []string) string {
	w := strings.ToLower(word)
	best, bestDist := "", -1
	for _, c := range candidates {
		d := Distance(w, strings.ToLower(c))
		if d <= threshold(w, c) && (bestDist < 0 || d < bestDist) {
			best, bestDist = c, d
		}
	}
	return best
}

// threshold is how many edits still look like a typo: more for longer words
// (max_retry → max_retries is three edits on a nine-letter word).
func threshold(word, candidate string) int {
	n := min(len(word), len(candidate))
	switch {
	case n <= 3:
		return 1
	case n <= 6:
		return 2
	default:
		return 3
	}
}

// Distance is the optimal-string-alignment edit distance (Levenshtein plus
// adjacent transpositions, so "pormpt" is one edit from "prompt").
func Distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
