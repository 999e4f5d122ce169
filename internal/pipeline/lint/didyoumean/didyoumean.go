// Package didyoumean finds the known word a misspelt one was probably meant
// to be, for "did you mean …?" fixes in diagnostics.
package didyoumean

import (
	"math/bits"
	"strings"
	"unicode/utf8"
)

// Closest returns the candidate nearest to word, or "" when none is near
// enough to be a plausible typo. Comparison ignores case; ties go to the
// earlier candidate so results are deterministic.
func Closest(word string, candidates []string) string {
	return NewIndex(candidates).Closest(word)
}

// Index is a list of candidates prepared for many lookups: a hostile file
// can ask for a suggestion half a million times, so each candidate that
// cannot be within the threshold is ruled out by its length and the letters
// it lacks before any edit distance is computed.
type Index struct{ cands []candidate }

type candidate struct {
	name, lower string
	runes       int
	letters     uint64 // letterSet(lower)
}

// NewIndex prepares candidates for Closest.
func NewIndex(candidates []string) *Index {
	x := &Index{cands: make([]candidate, len(candidates))}
	for i, c := range candidates {
		l := strings.ToLower(c)
		x.cands[i] = candidate{name: c, lower: l, runes: utf8.RuneCountInString(l), letters: letterSet(l)}
	}
	return x
}

// Closest is the package's Closest over the index's candidates.
func (x *Index) Closest(word string) string {
	w := strings.ToLower(word)
	runes, letters := utf8.RuneCountInString(w), letterSet(w)
	best, bestDist := "", -1
	for _, c := range x.cands {
		limit := threshold(w, c.name)
		// Each edit changes the length by at most one and removes at most
		// one letter that the other word lacks: lower bounds on the distance.
		if abs(runes-c.runes) > limit || bits.OnesCount64(letters&^c.letters) > limit ||
			bits.OnesCount64(c.letters&^letters) > limit {
			continue
		}
		d := Distance(w, c.lower)
		if d <= limit && (bestDist < 0 || d < bestDist) {
			best, bestDist = c.name, d
		}
	}
	return best
}

// letterSet is the set of s's letters, each rune hashed to one of 64 bits:
// a bit of one word missing from the other is a letter the other lacks.
func letterSet(s string) uint64 {
	var set uint64
	for _, r := range s {
		set |= 1 << (uint32(r) % 64)
	}
	return set
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
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
	// Words as long as attribute names fit in buffers on the stack: a
	// hostile file asks for hundreds of thousands of distances.
	var bufA, bufB [48]rune
	var rows [3][49]int
	ra, rb := appendRunes(bufA[:0], a), appendRunes(bufB[:0], b)
	var prev2, prev, cur []int
	if len(rb) < len(rows[0]) {
		prev2, prev, cur = rows[0][:len(rb)+1], rows[1][:len(rb)+1], rows[2][:len(rb)+1]
	} else {
		prev2, prev, cur = make([]int, len(rb)+1), make([]int, len(rb)+1), make([]int, len(rb)+1)
	}
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

func appendRunes(buf []rune, s string) []rune {
	for _, r := range s {
		buf = append(buf, r)
	}
	return buf
}
