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
)

// gateActionPrefix starts the action_id of every gate button.
const gateActionPrefix = "nanohost.gate."

// maxButtonsPerBlock is Slack's limit on elements in an actions block.
const maxButtonsPerBlock = 25

// rendered is a message ready for the Web API: the notification text and
// the blocks people see.
type rendered struct {
	text   string
	blocks []slackgo.Block
}

// render turns a channel-neutral message into Block Kit. Every piece of
// text that did not come from nanohost itself is escaped.
func render(m channels.Message) rendered {
	switch {
	case m.Card != nil:
		return renderCard(*m.Card)
	case m.Gate != nil:
		return renderPrompt(*m.Gate)
	case m.Resolved != nil:
		return renderResolution(*m.Resolved)
	}
	return renderText(m)
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
	return rendered{text: escapeLimited(text, maxMessageText, "…"),
		blocks: []slackgo.Block{section(escapeLimited(text, maxSectionText, "…"))}}
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
	return rendered{text: fallback, blocks: blocks}
}

// quoteLines puts escaped text in a mrkdwn block quote.
func quoteLines(escaped string) string {
	return "&gt; " + strings.ReplaceAll(escaped, "\n", "\n&gt; ")
}

func renderCard(c channels.StatusCard) rendered {
	blocks := []slackgo.Block{slackgo.NewHeaderBlock(plain(channels.CardTitle(c), maxHeaderText))}
	if c.Goal != "" {
		blocks = append(blocks, section(escapeLimited("Goal: "+c.Goal, maxSectionText, "…")))
	}
	fields := []*slackgo.TextBlockObject{mrkdwn("*Status*\n" + escapeMrkdwn(channels.StateText(c.State)))}
	if c.Current != "" {
		fields = append(fields, mrkdwn("*Stage*\n"+escapeLimited(channels.Progress(c.Current, c.Index, c.Total), maxFieldText-20, "…")))
	}
	fields = append(fields, mrkdwn("*Elapsed*\n"+channels.FormatDuration(c.Elapsed)))
	if c.LastOutcome != "" {
		fields = append(fields, mrkdwn("*Last*\n"+escapeLimited(c.LastOutcome, maxFieldText-20, "…")))
	}
	if cost := channels.FormatCost(c.CostUSD); cost != "" {
		fields = append(fields, mrkdwn("*Cost*\n"+cost))
	}
	if c.Reason != "" {
		fields = append(fields, mrkdwn("*Reason*\n"+escapeLimited(c.Reason, maxFieldText-20, "…")))
	}
	blocks = append(blocks, slackgo.NewSectionBlock(nil, fields, nil))
	blocks = append(blocks, slackgo.NewContextBlock("", mrkdwn("run `"+escapeMrkdwn(c.RunID)+"` · details in this thread")))
	return rendered{text: escapeLimited(channels.CardText(c), maxMessageText, "…"), blocks: blocks}
}

// gateButton is what a gate button carries in its value: enough to match a
// click to exactly one option of one posting of one gate of one run. The
// option goes by position, which names it even when two options share an
// accelerator key, and keeps the value far below Slack's 2,000 characters
// whatever the label. (Choice is read from buttons posted by older
// versions, which carried the choice value.)
type gateButton struct {
	Run    string `json:"r"`
	Gate   string `json:"g"`
	Nonce  string `json:"n"`
	Option int    `json:"o,omitempty"`
	Choice string `json:"c,omitempty"`
}

func renderPrompt(p channels.GatePrompt) rendered {
	q := p.Question
	blocks := []slackgo.Block{section(escapeLimited("❓ "+q.Text, maxSectionText, "…"))}
	var buttons []slackgo.BlockElement
	freeform := ""
	for i, o := range q.Options {
		if o.Freeform {
			freeform = o.Label
			continue
		}
		value, _ := json.Marshal(gateButton{Run: p.RunID, Gate: p.GateID, Nonce: p.Nonce, Option: i + 1})
		b := slackgo.NewButtonBlockElement(gateActionPrefix+p.Nonce+"."+strconv.Itoa(i), string(value),
			plain(channels.OptionText(o.Label, o.Key), maxButtonText))
		buttons = append(buttons, b)
	}
	for start := 0; start < len(buttons); start += maxButtonsPerBlock {
		end := min(start+maxButtonsPerBlock, len(buttons))
		blockID := gateActionPrefix + p.Nonce + ".b" + strconv.Itoa(start/maxButtonsPerBlock)
		blocks = append(blocks, slackgo.NewActionBlock(blockID, buttons[start:end]...))
	}
	var notes []string
	if freeform != "" || (len(buttons) == 0 && channels.AcceptsText(q)) {
		hint := "Reply in this thread with text to answer"
		if freeform != "" {
			hint += " *" + escapeMrkdwn(freeform) + "*"
		}
		notes = append(notes, hint+".")
	}
	if q.TimeoutSeconds > 0 {
		notes = append(notes, "Times out in "+channels.FormatDuration(time.Duration(q.TimeoutSeconds*float64(time.Second)))+".")
	}
	if q.Approvers != "" {
		notes = append(notes, "Approvers: "+renderPrincipals(q.Approvers)+".")
	}
	for _, l := range p.Links {
		notes = append(notes, renderLink(l))
	}
	if len(notes) > 0 {
		blocks = append(blocks, slackgo.NewContextBlock("", mrkdwn(strings.Join(notes, " "))))
	}
	return rendered{text: escapeLimited("❓ "+q.Text, maxMessageText, "…"), blocks: blocks}
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
// mentions, everything else escaped.
func renderPrincipals(list string) string {
	var out []string
	for p := range strings.SplitSeq(list, ",") {
		p = strings.TrimSpace(p)
		switch {
		case strings.HasPrefix(p, "group:") && groupIDPattern.MatchString(strings.TrimPrefix(p, "group:")):
			out = append(out, "<!subteam^"+strings.TrimPrefix(p, "group:")+">")
		case p != "":
			out = append(out, mention(p))
		}
	}
	return strings.Join(out, ", ")
}

func renderResolution(r channels.GateResolution) rendered {
	q := r.Prompt.Question
	var outcome string
	switch r.Outcome {
	case channels.GateAnswered:
		what := "*" + escapeMrkdwn(r.Choice) + "*"
		if r.Text != "" {
			what += ": " + escapeLimited(r.Text, maxSectionText-200, "…")
		}
		outcome = fmt.Sprintf("✓ %s chose %s · %s", mention(r.By), what, r.At.UTC().Format("2006-01-02 15:04 UTC"))
	case channels.GateTimedOut:
		outcome = "⌛ Timed out. " + escapeMrkdwn(r.Note)
	default:
		outcome = "⊘ " + escapeMrkdwn(r.Note)
	}
	blocks := []slackgo.Block{
		section(escapeLimited("❓ "+q.Text, maxSectionText, "…")),
		section(outcome),
	}
	return rendered{text: escapeLimited(channels.ResolutionText(r), maxMessageText, "…"), blocks: blocks}
}

// decodeGateAction reads a gate button click; ok is false for buttons that
// are not gate buttons or whose action_id and value disagree.
func decodeGateAction(actionID, value string) (channels.GateAnswer, bool) {
	rest, isGate := strings.CutPrefix(actionID, gateActionPrefix)
	if !isGate {
		return channels.GateAnswer{}, false
	}
	nonce, _, _ := strings.Cut(rest, ".")
	var b gateButton
	if err := json.Unmarshal([]byte(value), &b); err != nil || b.Nonce != nonce || b.Run == "" || b.Gate == "" || b.Option < 0 || (b.Option == 0 && b.Choice == "") {
		return channels.GateAnswer{}, false
	}
	return channels.GateAnswer{RunID: b.Run, GateID: b.Gate, Nonce: b.Nonce, Option: b.Option, Choice: b.Choice}, true
}

func nonEmpty(s string) string {
	if strings.TrimSpace(s) == "" {
		return "(no text)"
	}
	return s
}
