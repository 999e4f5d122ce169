package channels

import (
	"strings"
	"unicode"
)

// CleanPasted undoes what chat clients do to code pasted into a message,
// so a DOT graph survives the trip through Slack:
//
//   - Slack's link markup (<https://x|x>, <mailto:…>, <@U1>, <#C1|name>) is
//     turned back into the text the user typed;
//   - the HTML entities Slack escapes (&lt; &gt; &amp;) are unescaped;
//   - smart quotes become straight quotes, non-breaking spaces spaces, and
//     an em dash autocorrected from "--" in front of a flag becomes "--";
//   - code fences (```dot … ```, or `…` around the whole text) are removed.
func CleanPasted(s string) string {
	s = unwrapSlackMarkup(s)
	s = entityReplacer.Replace(s)
	s = typographyReplacer.Replace(s)
	return stripFences(s)
}

// entityReplacer unescapes the three entities Slack escapes; strings.Replacer
// works left to right in one pass, so "&amp;lt;" correctly becomes "&lt;".
var entityReplacer = strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&")

var typographyReplacer = strings.NewReplacer(
	"\u201c", `"`, "\u201d", `"`, "\u201e", `"`, "\u201f", `"`, "\u2033", `"`,
	"\u2018", "'", "\u2019", "'", "\u201a", "'", "\u201b", "'", "\u2032", "'",
	"\u00a0", " ", "\u2007", " ", "\u202f", " ",
	"\u2014verbosity", "--verbosity", "\u2013verbosity", "--verbosity",
)

// unwrapSlackMarkup replaces <target|label> and <target> markup with the
// text it stands for. Slack escapes literal angle brackets as entities, so
// every raw '<' in a message is markup.
func unwrapSlackMarkup(s string) string {
	if !strings.Contains(s, "<") {
		return s
	}
	var b strings.Builder
	for {
		open := strings.IndexByte(s, '<')
		if open < 0 {
			break
		}
		end := strings.IndexByte(s[open:], '>')
		if end < 0 {
			break
		}
		b.WriteString(s[:open])
		b.WriteString(markupText(s[open+1 : open+end]))
		s = s[open+end+1:]
	}
	b.WriteString(s)
	return b.String()
}

func markupText(inner string) string {
	target, label, hasLabel := strings.Cut(inner, "|")
	switch {
	case strings.HasPrefix(target, "@"): // user mention
		if hasLabel {
			return "@" + label
		}
		return target
	case strings.HasPrefix(target, "#"): // channel link
		if hasLabel {
			return "#" + label
		}
		return target
	case strings.HasPrefix(target, "!"): // <!here>, <!subteam^S1|@team>
		if hasLabel {
			return label
		}
		return "@" + strings.TrimPrefix(target, "!")
	case hasLabel:
		return label
	}
	return strings.TrimPrefix(target, "mailto:")
}

// stripFences removes ``` fences (with an optional language tag on the
// opening fence) and single backticks wrapping the whole text.
func stripFences(s string) string {
	if strings.Contains(s, "```") {
		parts := strings.Split(s, "```")
		var b strings.Builder
		for i, p := range parts {
			if i%2 == 1 { // inside a fence: drop a language tag line
				p = dropLanguageTag(p)
			}
			b.WriteString(p)
		}
		s = b.String()
	}
	t := strings.TrimSpace(s)
	if len(t) >= 2 && t[0] == '`' && t[len(t)-1] == '`' && !strings.Contains(t[1:len(t)-1], "`") {
		return t[1 : len(t)-1]
	}
	return s
}

// dropLanguageTag removes "dot\n" from the start of a fenced block, but not
// the DOT keyword of a graph pasted right after the fence.
func dropLanguageTag(block string) string {
	nl := strings.IndexByte(block, '\n')
	if nl <= 0 {
		return block
	}
	tag := strings.TrimSpace(block[:nl])
	if tag == "" || strings.ContainsAny(tag, " \t{") {
		return block
	}
	if looksLikeDOT(tag) {
		return block
	}
	return block[nl+1:]
}

// PasteOpen reports whether text — the lines of a /pipeline command typed
// so far — starts a pipeline it has not finished: a code fence not closed
// yet, or a graph whose closing brace has not come. A terminal delivers a
// pasted pipeline line by line; the console reads on until it is whole.
func PasteOpen(text string) bool {
	rest, ok := strings.CutPrefix(strings.TrimSpace(text), "/pipeline")
	if !ok || rest == "" || !unicode.IsSpace(rune(rest[0])) {
		return false
	}
	rest, _, err := extractVerbosity(rest)
	if err != nil {
		return false
	}
	rest = strings.TrimSpace(rest)
	if word, after := cutWord(rest); strings.EqualFold(word, "run") || strings.EqualFold(word, "validate") {
		rest = after
	}
	if strings.HasPrefix(rest, "```") {
		return strings.Count(rest, "```")%2 == 1
	}
	if !looksLikeDOT(rest) {
		return false
	}
	depth, opened := braceDepth(rest)
	return !opened || depth > 0
}

// braceDepth counts the braces of DOT source left open, outside quoted
// strings and comments; opened reports whether any brace opened.
func braceDepth(src string) (depth int, opened bool) {
	inQuote, lineComment, blockComment := false, false, false
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case lineComment:
			lineComment = c != '\n'
		case blockComment:
			if c == '*' && i+1 < len(src) && src[i+1] == '/' {
				blockComment = false
				i++
			}
		case inQuote:
			if c == '\\' {
				i++
			} else if c == '"' {
				inQuote = false
			}
		case c == '"':
			inQuote = true
		case c == '#' && atLineStart(src, i), c == '/' && i+1 < len(src) && src[i+1] == '/':
			lineComment = true
		case c == '/' && i+1 < len(src) && src[i+1] == '*':
			blockComment = true
			i++
		case c == '{':
			depth++
			opened = true
		case c == '}':
			depth--
		}
	}
	return depth, opened
}

// atLineStart reports whether only blanks precede src[i] on its line (where
// DOT takes # as a comment).
func atLineStart(src string, i int) bool {
	line := src[:i]
	if nl := strings.LastIndexByte(line, '\n'); nl >= 0 {
		line = line[nl+1:]
	}
	return strings.TrimLeft(line, " \t") == ""
}
