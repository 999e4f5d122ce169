package agenttext

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"

	"nanohost/internal/pipeline"
)

// Parse reads the tags in an agent's response.
//
// A tag is '[', a tag name, ':', a value and ']' on one line; spaces around
// the name and the value are ignored and the value may hold balanced brackets,
// so [preferred_label:[A] Approve] works. Tags are found anywhere in the text,
// fenced code included: agents put them at the end, where "the last one wins"
// makes an earlier quoted example harmless.
//
// Every tag is removed from Clean, even one whose value is not understood, so
// that people never see tag syntax; removing a tag that would splice a new tag
// together ("[outc[next:x]ome:fail]") removes that one too.
func Parse(text string) Parsed {
	var p Parsed
	s := scanner{text: text, p: &p}
	s.run()
	p.Clean = s.clean()
	return p
}

// scanner removes tags in one left-to-right pass. It copies the text into out
// and keeps the positions of the '[' of the current line that are not yet
// closed; on each ']' it checks whether out from the innermost open '[' is a
// tag. Checking out (not the input) is what catches tags spliced together by
// an earlier removal.
type scanner struct {
	text string
	p    *Parsed

	out       []byte
	open      []int
	lineStart int  // index in out where the current line starts
	touched   bool // a tag was removed from the current line
	dropped   bool // a line that held only tags was removed
}

func (s *scanner) run() {
	s.out = make([]byte, 0, len(s.text))
	for i := 0; i < len(s.text); i++ {
		switch c := s.text[i]; c {
		case '\n':
			if s.endLine() {
				s.out = append(s.out, '\n')
			}
			s.lineStart = len(s.out)
		case '[':
			s.open = append(s.open, len(s.out))
			s.out = append(s.out, c)
		case ']':
			s.out = append(s.out, c)
			i = s.closeBracket(i)
		default:
			s.out = append(s.out, c)
		}
	}
	s.endLine()
}

// closeBracket handles the ']' at text[i] (already copied to out) and
// returns the index of the last input byte consumed.
func (s *scanner) closeBracket(i int) int {
	if len(s.open) == 0 {
		return i
	}
	start := s.open[len(s.open)-1]
	s.open = s.open[:len(s.open)-1]
	t, ok := matchTag(s.out[start:])
	if !ok {
		return i
	}
	s.apply(t)
	s.out = s.out[:start]
	s.touched = true
	// `[outcome:success]` and **[outcome:success]** would otherwise leave
	// an empty code span or bold marker behind.
	for _, wrap := range []string{"**", "`"} {
		if bytes.HasSuffix(s.out[s.lineStart:], []byte(wrap)) && strings.HasPrefix(s.text[i+1:], wrap) {
			s.out = s.out[:len(s.out)-len(wrap)]
			i += len(wrap)
			break
		}
	}
	// Swallow the spaces after a tag that followed a space or began the
	// line, so "Done. [outcome:success] Next" reads "Done. Next".
	if len(s.out) == s.lineStart || isHSpace(s.out[len(s.out)-1]) {
		for i+1 < len(s.text) && isHSpace(s.text[i+1]) {
			i++
		}
	}
	return i
}

// endLine tidies the line being built: a line that held only tags goes
// away with its newline, and one that lost a tag loses its trailing spaces.
// It reports whether the line's newline should be kept.
func (s *scanner) endLine() (keepNewline bool) {
	s.open = s.open[:0]
	if !s.touched {
		return true
	}
	s.touched = false
	end := len(s.out)
	for end > s.lineStart && isSpace(s.out[end-1]) {
		end--
	}
	s.out = s.out[:end]
	if end == s.lineStart {
		s.dropped = true
		return false
	}
	return true
}

var blankRun = regexp.MustCompile(`\n[ \t\r]*\n(?:[ \t\r]*\n)+`)

func (s *scanner) clean() string {
	c := string(s.out)
	if s.dropped {
		// A removed tag line between two paragraphs leaves two blank lines.
		c = blankRun.ReplaceAllString(c, "\n\n")
	}
	c = strings.TrimRight(c, " \t\r\n")
	// A response that held a tag on its first line starts with the
	// newline that ended it.
	if s.dropped {
		c = strings.TrimLeft(c, "\r\n")
	}
	return c
}

func (s *scanner) apply(t tag) {
	v := unquote(t.value)
	switch t.name {
	case tagOutcome:
		st := NormalizeStatus(v)
		if st == "" {
			s.warn(t, "%q is not an outcome; use success, partial_success, retry, fail, skipped or a custom outcome word (letters, digits, _)", v)
			return
		}
		if typo := pipeline.OutcomeTypo(st); typo != "" {
			s.warn(t, "%q is taken as a custom outcome; did you mean %s?", v, typo)
		}
		s.p.Status = st
	case tagPreferredLabel:
		if v != "" {
			s.p.PreferredLabel = v
		}
	case tagNext:
		for id := range strings.SplitSeq(v, ",") {
			id = unquote(strings.TrimSpace(id))
			if id != "" && !contains(s.p.Next, id) {
				s.p.Next = append(s.p.Next, id)
			}
		}
	case tagContext:
		key, val, ok := strings.Cut(v, "=")
		key = unquote(strings.TrimSpace(key))
		if !ok || key == "" {
			s.warn(t, "write it as [context:key=value]")
			return
		}
		if s.p.Context == nil {
			s.p.Context = map[string]string{}
		}
		s.p.Context[key] = unquote(strings.TrimSpace(val))
	}
}

func (s *scanner) warn(t tag, format string, args ...any) {
	raw := t.raw
	if len(raw) > 80 {
		raw = raw[:77] + "..."
	}
	s.p.Warnings = append(s.p.Warnings, fmt.Sprintf("ignored tag %s: %s", raw, fmt.Sprintf(format, args...)))
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func isHSpace(c byte) bool { return c == ' ' || c == '\t' }

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' }
