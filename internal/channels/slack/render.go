package slack

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	slackgo "github.com/slack-go/slack"

	"nanohost/internal/channels"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runlog"
	"nanohost/internal/runs"
)

// gateActionPrefix starts the action_id of every gate button.
const gateActionPrefix = "nanohost.gate."

// rendered is a message ready for the Web API: the notification text and
// the blocks people see.
type rendered struct {
	text   string
	blocks []slackgo.Block
	// fallback is what to send if Slack refuses the blocks anyway: a gate
	// prompt's buttons with the least text, else the text alone.
	fallback *rendered
}

// render turns a channel-neutral message into Block Kit held to Slack's
// limits (fit). Every piece of text that did not come from nanohost itself
// is escaped. A gate prompt renders with renderPromptPages.
func render(m channels.Message) rendered {
	var r rendered
	switch {
	case m.Card != nil:
		r = renderCard(*m.Card, m.Links)
	case m.Gate != nil:
		r = renderPromptPages(*m.Gate, m.Links)[0]
	case m.Resolved != nil:
		r = renderResolution(*m.Resolved)
	default:
		r = renderText(m)
	}
	if r.fallback == nil {
		r.fallback = &rendered{text: r.text}
	}
	return fit(r)
}

func mrkdwn(text string) *slackgo.TextBlockObject {
	// verbatim: Slack must not auto-link names or URLs in what we post.
	return slackgo.NewTextBlockObject(slackgo.MarkdownType, text, false, true)
}

func plain(text string, limit int) *slackgo.TextBlockObject {
	return slackgo.NewTextBlockObject(slackgo.PlainTextType, plainLimited(text, limit), false, false)
}

func section(text string) *slackgo.SectionBlock {
	return slackgo.NewSectionBlock(mrkdwn(text), nil, nil)
}

// ephemeralMessage is a reply shown to one user (plain text, escaped).
func ephemeralMessage(text string) rendered {
	plainText := escapeLimited(text, maxMessageText, "…")
	return fit(rendered{text: plainText, blocks: []slackgo.Block{section(escapeLimited(text, maxSectionText, "…"))},
		fallback: &rendered{text: plainText}})
}

func renderText(m channels.Message) rendered {
	note := truncationNote(m.LogRef)
	body := escapeLimited(m.Text, maxSectionText, note)
	blocks := []slackgo.Block{section(nonEmpty(body))}
	fallback := body
	if m.Detail != "" {
		quoted := escapeLimited(m.Detail, maxSectionText-200, note)
		blocks = append(blocks, section(quoteLines(quoted)))
		fallback = escapeLimited(m.Text+"\n"+m.Detail, maxMessageText, note)
	}
	if len(m.Links) > 0 {
		var links []string
		for _, l := range m.Links {
			links = append(links, renderLink(l))
		}
		blocks = append(blocks, slackgo.NewContextBlock("", mrkdwn(strings.Join(links, " · "))))
		// the text alone (a notification, or what is sent if the blocks
		// are refused) keeps them as plain lines
		plainText := m.Text
		if m.Detail != "" {
			plainText += "\n" + m.Detail
		}
		fallback = escapeLimited(plainText+channels.LinksText(m.Links), maxMessageText, note)
	}
	return rendered{text: fallback, blocks: blocks}
}

// quoteLines puts escaped text in a mrkdwn block quote.
func quoteLines(escaped string) string {
	return "&gt; " + strings.ReplaceAll(escaped, "\n", "\n&gt; ")
}

func renderCard(c runlog.Card, links []channels.Link) rendered {
	blocks := []slackgo.Block{slackgo.NewHeaderBlock(plain(c.Title(), maxHeaderText))}
	if goal := c.GoalLine(); goal != "" {
		blocks = append(blocks, section(escapeLimited(goal, maxSectionText, "…")))
	}
	var fields []*slackgo.TextBlockObject
	for _, f := range c.Fields() {
		fields = append(fields, mrkdwn("*"+f.Title+"*\n"+escapeLimited(f.Text, maxFieldText-20, "…")))
	}
	blocks = append(blocks, slackgo.NewSectionBlock(nil, fields, nil))
	footer := runlog.RunRef("`" + escapeMrkdwn(runs.ShortID(c.RunID)) + "`")
	for _, l := range links {
		if l.URL != "" {
			footer += " · " + renderLink(l)
		}
	}
	blocks = append(blocks, slackgo.NewContextBlock("", mrkdwn(footer+" · "+runlog.CardFooter)))
	return rendered{text: escapeLimited(c.Text(), maxMessageText, "…"), blocks: blocks}
}

// gateButton is what a gate button carries in its value: enough to match a
// click to exactly one option of one posting of one gate of one run. The
// option goes by position, which names it even when two options share an
// accelerator key, and keeps the value small whatever the label. A gate id
// too long for the value (an author's node name can be) is left out: the
// channel remembers it by the posting's nonce (see Channel.gateIDs).
// (Choice is read from buttons posted by older versions, which carried the
// choice value.)
type gateButton struct {
	Run    string `json:"r"`
	Gate   string `json:"g,omitempty"`
	Nonce  string `json:"n"`
	Option int    `json:"o,omitempty"`
	Choice string `json:"c,omitempty"`
}

// Gate prompt layout: up to buttonsPerPage buttons go in one message; more
// follow in further messages in the thread, so every choice stays a
// button. A button's label gets its share of the message's text budget,
// never less than minLabel characters.
const (
	buttonsPerPage = 250
	minLabel       = 24
	// maxNoteText bounds the prompt's footnotes (freeform hint, timeout,
	// approvers), whose parts come from the pipeline's author.
	maxNoteText = 1500
)

// renderPromptPages renders a gate prompt: the question, a button per
// choice (25 to an actions block), and notes on how else to answer. Choices
// beyond one message's capacity go to follow-up pages.
func renderPromptPages(p runs.Gate, links []channels.Link) []rendered {
	q := p.Question()
	asked := runlog.Asked(q)
	question := escapeLimited(asked, maxSectionText, "…")
	notes := promptNotes(q, links)
	var choices []int
	for i, o := range q.Options {
		if !o.Freeform {
			choices = append(choices, i)
		}
	}
	var pages []rendered
	for start := 0; start == 0 || start < len(choices); start += buttonsPerPage {
		chunk := choices[start:min(start+buttonsPerPage, len(choices))]
		var head []slackgo.Block
		if start == 0 {
			head = []slackgo.Block{section(question)}
			if notes != "" {
				head = append(head, slackgo.NewContextBlock("", mrkdwn(notes)))
			}
		} else {
			head = []slackgo.Block{section(escapeLimited(runlog.AskedPage(cutRunes(runlog.QuestionText(q), 100), start+1, start+len(chunk), len(choices)), maxSectionText, "…"))}
		}
		budget := maxBlocksText - blocksTextLen(head)
		page := rendered{text: escapeLimited(asked, maxMessageText, "…"),
			blocks: append(head, promptButtons(p, chunk, len(pages), labelBudget(budget, len(chunk)))...)}
		// If Slack refuses the blocks anyway: the same buttons, the least text.
		page.fallback = &rendered{text: page.text, blocks: append([]slackgo.Block{section(escapeLimited(asked, 300, "…"))},
			promptButtons(p, chunk, len(pages), 12)...)}
		pages = append(pages, page)
	}
	for i := range pages {
		pages[i] = fit(pages[i])
	}
	return pages
}

// labelBudget is each of n buttons' share of budget characters, between
// minLabel and Slack's maxButtonText.
func labelBudget(budget, n int) int {
	if n == 0 {
		return maxButtonText
	}
	return min(maxButtonText, max(minLabel, budget/n))
}

// promptButtons renders the buttons of the options at positions choices,
// in actions blocks of 25, labels cut to label characters.
func promptButtons(p runs.Gate, choices []int, page, label int) []slackgo.Block {
	keepGate := !longGateID(p)
	var buttons []slackgo.BlockElement
	for _, i := range choices {
		o := p.Choices[i]
		text := runlog.OptionText(o.Label, o.Key)
		if strings.TrimSpace(text) == "" {
			text = runlog.ChoiceN(i + 1)
		}
		if label < minLabel { // the least text: the key, or the position
			text = o.Key
			if text == "" {
				text = runlog.ChoiceN(i + 1)
			}
		}
		buttons = append(buttons, slackgo.NewButtonBlockElement(gateActionPrefix+p.Nonce+"."+strconv.Itoa(i),
			buttonValue(p, i+1, keepGate), plain(text, label)))
	}
	var blocks []slackgo.Block
	for start := 0; start < len(buttons); start += maxActionElements {
		end := min(start+maxActionElements, len(buttons))
		blockID := fmt.Sprintf("%s%s.b%d.%d", gateActionPrefix, p.Nonce, page, start/maxActionElements)
		blocks = append(blocks, slackgo.NewActionBlock(blockID, buttons[start:end]...))
	}
	return blocks
}

// buttonValue is a button's value, within Slack's 2,000 characters: the gate
// id is left out when it would not fit (see gateButton).
func buttonValue(p runs.Gate, option int, keepGate bool) string {
	b := gateButton{Run: p.RunID, Nonce: p.Nonce, Option: option}
	if keepGate {
		b.Gate = p.GateID
	}
	value, _ := json.Marshal(b)
	return string(value)
}

// longGateID reports whether p's gate id does not fit in its buttons'
// values (measured with the widest option number).
func longGateID(p runs.Gate) bool {
	if len(p.GateID) < maxButtonValue/6-100 { // even if every byte were escaped as \uXXXX
		return false
	}
	value, _ := json.Marshal(gateButton{Run: p.RunID, Gate: p.GateID, Nonce: p.Nonce, Option: len(p.Choices)})
	return len(value) > maxButtonValue
}

// promptNotes says how else a gate is answered, when it times out, who
// may answer and where to look (its links), within maxNoteText.
func promptNotes(q engine.Question, links []channels.Link) string {
	var notes []string
	freeform := ""
	buttons := 0
	for _, o := range q.Options {
		if o.Freeform {
			freeform = o.Label
		} else {
			buttons++
		}
	}
	if freeform != "" || (buttons == 0 && q.AcceptsText()) {
		label := ""
		if freeform != "" {
			label = "*" + escapeLimited(freeform, 200, "…") + "*"
		}
		notes = append(notes, runlog.ReplyToAnswer(label))
	}
	if q.TimeoutSeconds > 0 {
		notes = append(notes, runlog.TimesOutIn(time.Duration(q.TimeoutSeconds*float64(time.Second))))
	}
	if q.Approvers != "" {
		notes = append(notes, runlog.Approvers(renderPrincipals(q.Approvers, maxNoteText-600)))
	}
	for _, l := range links {
		notes = append(notes, renderLink(l))
	}
	return strings.Join(notes, " ")
}

// renderLink shows a link's text, linked when it has a URL Slack can open.
func renderLink(l channels.Link) string {
	text := escapeMrkdwn(l.Text)
	if u, err := url.Parse(l.URL); err == nil && (u.Scheme == "http" || u.Scheme == "https") && !strings.ContainsAny(l.URL, "<>|") {
		return "<" + l.URL + "|" + text + ">"
	}
	return text
}

// renderPrincipals shows an approvers list with user mentions and group
// mentions, everything else escaped, in at most limit characters (the
// list comes from the pipeline's author): "and N more" ends a longer one.
func renderPrincipals(list string, limit int) string {
	var out []string
	var parts []string
	for p := range strings.SplitSeq(list, ",") {
		if p = strings.TrimSpace(p); p != "" {
			parts = append(parts, p)
		}
	}
	used := 0
	for i, p := range parts {
		var shown string
		switch {
		case strings.HasPrefix(p, "group:") && groupIDPattern.MatchString(strings.TrimPrefix(p, "group:")):
			shown = "<!subteam^" + strings.TrimPrefix(p, "group:") + ">"
		default:
			shown = mention(cutRunes(p, 80))
		}
		if used+textLen(shown)+2 > limit-20 {
			out = append(out, runlog.AndMore(len(parts)-i))
			break
		}
		used += textLen(shown) + 2
		out = append(out, shown)
	}
	return strings.Join(out, ", ")
}

func renderResolution(r runlog.Resolution) rendered {
	var outcome string
	switch r.State {
	case runs.GateAnswered:
		what := "*" + escapeLimited(r.Choice, 200, "…") + "*"
		switch {
		case r.Answer != "" && r.Choice == "":
			what = escapeLimited(fmt.Sprintf("%q", r.Answer), maxSectionText-400, "…")
		case r.Answer != "":
			what += ": " + escapeLimited(r.Answer, maxSectionText-400, "…")
		}
		outcome = runlog.Chose(mention(r.By), what, r.At)
	case runs.GateTimedOut:
		outcome = runlog.TimedOut(escapeLimited(r.Note, 1000, "…"))
	default:
		outcome = runlog.Withdrawn(escapeLimited(r.Note, 1000, "…"))
	}
	blocks := []slackgo.Block{
		section(escapeLimited(runlog.Asked(r.Question), maxSectionText, "…")),
		section(outcome),
	}
	return rendered{text: escapeLimited(r.Text(), maxMessageText, "…"), blocks: blocks}
}

// renderSettledPage replaces a follow-up page of a settled prompt's
// buttons.
func renderSettledPage() rendered {
	text := runlog.SettledChoices
	return fit(rendered{text: text, blocks: []slackgo.Block{slackgo.NewContextBlock("", mrkdwn(text))}})
}

// decodeGateAction reads a gate button click; ok is false for buttons that
// are not gate buttons or whose action_id and value disagree. gateOf
// recalls a gate id left out of the value (see gateButton).
func decodeGateAction(actionID, value string, gateOf func(nonce string) string) (runs.GateAnswer, bool) {
	rest, isGate := strings.CutPrefix(actionID, gateActionPrefix)
	if !isGate {
		return runs.GateAnswer{}, false
	}
	nonce, _, _ := strings.Cut(rest, ".")
	var b gateButton
	if err := json.Unmarshal([]byte(value), &b); err == nil && b.Gate == "" && b.Nonce == nonce {
		b.Gate = gateOf(nonce)
	}
	if b.Nonce != nonce || b.Run == "" || b.Gate == "" || b.Option < 0 || (b.Option == 0 && b.Choice == "") {
		return runs.GateAnswer{}, false
	}
	return runs.GateAnswer{RunID: b.Run, GateID: b.Gate, Nonce: b.Nonce, Option: b.Option, Choice: b.Choice}, true
}

func nonEmpty(s string) string {
	if strings.TrimSpace(s) == "" {
		return "(no text)"
	}
	return s
}
