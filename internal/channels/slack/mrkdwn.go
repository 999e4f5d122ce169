package slack

import (
	"regexp"
	"strings"
	"unicode/utf16"

	"github.com/slack-go/slack/slackutilsx"

	"nanohost/internal/runlog"
)

// broadcastWords are the bare words some clients turn into pings; a word
// joiner after the @ keeps them readable but inert.
var broadcastWords = regexp.MustCompile(`(?i)@(channel|here|everyone)\b`)

// escapeMrkdwn makes untrusted text (agent output, pipeline labels, user
// input echoed back) safe to place in mrkdwn: slack-go's EscapeMessage
// escapes the three characters mrkdwn gives meaning to (with < and >
// escaped, no <!channel>, <@U…>, <#C…> or <url|label> markup can ping
// anyone or disguise a link).
func escapeMrkdwn(s string) string {
	s = slackutilsx.EscapeMessage(s)
	return broadcastWords.ReplaceAllString(s, "@\u2060$1")
}

// userIDPattern matches Slack user ids, the only thing we turn into a mention.
var userIDPattern = regexp.MustCompile(`^[UW][A-Z0-9]{2,}$`)

// mention renders a user id as a mention, or escaped text if it is not one.
func mention(user string) string {
	if userIDPattern.MatchString(user) {
		return "<@" + user + ">"
	}
	return escapeMrkdwn(user)
}

// escapeLimited escapes raw for mrkdwn and cuts it to at most limit
// characters, ending with note when it had to cut. It cuts the source text,
// never the escaped text, so an entity like &amp; is never split, and it
// closes a ``` code block the cut left open. Characters are counted as
// UTF-16 code units (an emoji beyond the Basic Multilingual Plane counts
// twice), which is never fewer than Slack counts.
func escapeLimited(raw string, limit int, note string) string {
	if escapedLen(raw, limit) <= limit {
		if escaped := escapeMrkdwn(raw); textLen(escaped) <= limit {
			return escaped
		}
	}
	budget := limit - textLen(note) - len(closeFence)
	n, used := 0, 0
	for _, r := range raw {
		w := escapedWidth(r)
		if used+w > budget {
			break
		}
		used += w
		n++
	}
	kept := escapeMrkdwn(cutRunes(raw, n))
	// Word joiners after @channel can still overshoot; every source
	// character dropped shortens the result by at least one.
	for over := textLen(kept) - budget; over > 0 && n > 0; over = textLen(kept) - budget {
		n = max(0, n-over)
		kept = escapeMrkdwn(cutRunes(raw, n))
	}
	if strings.Count(kept, "```")%2 == 1 {
		kept += closeFence // the code block the cut opened ends before the note
	}
	return kept + note
}

// closeFence ends a code block a cut left open.
const closeFence = "\n```"

// escapedLen is raw's length once entities are escaped (joiners aside),
// counted only up to just past limit.
func escapedLen(raw string, limit int) int {
	total := 0
	for _, r := range raw {
		if total += escapedWidth(r); total > limit {
			break
		}
	}
	return total
}

// escapedWidth is how many characters r takes once escaped.
func escapedWidth(r rune) int {
	switch r {
	case '&':
		return len("&amp;")
	case '<', '>':
		return len("&lt;")
	}
	return utf16.RuneLen(r)
}

// textLen is s's length in UTF-16 code units.
func textLen(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// cutRunes returns s's first n characters.
func cutRunes(s string, n int) string {
	if n <= 0 {
		return ""
	}
	i := 0
	for pos := range s {
		if i == n {
			return s[:pos]
		}
		i++
	}
	return s
}

// plainLimited cuts plain_text (which Slack does not parse) to limit
// characters (UTF-16 code units, as escapeLimited).
func plainLimited(s string, limit int) string {
	if textLen(s) <= limit {
		return s
	}
	used, n := 0, 0
	for _, r := range s {
		if used+utf16.RuneLen(r) > limit-1 {
			break
		}
		used += utf16.RuneLen(r)
		n++
	}
	return cutRunes(s, n) + "…"
}

// truncationNote tells people where the rest of a cut text is.
func truncationNote(logRef string) string {
	where := runlog.TheRunsLogs
	if logRef != "" {
		where += " (" + logRef + ")"
	}
	return runlog.TruncatedNote(escapeMrkdwn(where))
}
