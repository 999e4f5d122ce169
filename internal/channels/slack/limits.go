package slack

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode/utf16"

	slackgo "github.com/slack-go/slack"
)

// Slack's limits on what a message may carry, all in one place. Lengths
// are characters counted as UTF-16 code units (an emoji beyond the Basic
// Multilingual Plane counts twice), never fewer than Slack counts. The
// renderers cut to them as they build a message (where they know what is
// worth keeping); fit then holds every message to all of them before it is
// sent, so no text or id a pipeline's author chose can make Slack refuse
// it, and a prompt never loses its buttons.
const (
	maxMessageText     = 4000 // the notification text: clients cut longer messages
	maxBlocks          = 50
	maxSectionText     = 3000
	maxFields          = 10
	maxFieldText       = 2000
	maxHeaderText      = 150
	maxContextElements = 10
	maxContextText     = 3000
	maxActionElements  = 25
	maxButtonText      = 75
	maxButtonValue     = 2000
	maxBlockID         = 255
	maxActionID        = 255
	// maxBlocksText bounds the text of all a message's blocks together.
	// Slack answers msg_blocks_too_long near 12,000 characters (it is not
	// documented, and block containers count too), so stay well below.
	maxBlocksText = 11000
)

// fit holds a rendered message to Slack's limits: every text cut (with
// "…", never inside an entity, a mention or a code block) to its block's
// limit and all of them together to maxBlocksText, ids shortened (kept
// unique with a hash), at most maxBlocks blocks.
func fit(r rendered) rendered {
	r.text = cutMrkdwn(r.text, maxMessageText)
	if len(r.blocks) > maxBlocks {
		r.blocks = r.blocks[:maxBlocks]
	}
	for _, b := range r.blocks {
		fitBlock(b)
	}
	shrinkBlocksText(r.blocks, maxBlocksText)
	if r.fallback != nil {
		f := fit(*r.fallback)
		r.fallback = &f
	}
	return r
}

func fitBlock(b slackgo.Block) {
	switch b := b.(type) {
	case *slackgo.SectionBlock:
		b.BlockID = shortID(b.BlockID, maxBlockID)
		fitText(b.Text, maxSectionText)
		if len(b.Fields) > maxFields {
			b.Fields = b.Fields[:maxFields]
		}
		for _, f := range b.Fields {
			fitText(f, maxFieldText)
		}
	case *slackgo.HeaderBlock:
		b.BlockID = shortID(b.BlockID, maxBlockID)
		fitText(b.Text, maxHeaderText)
	case *slackgo.ContextBlock:
		b.BlockID = shortID(b.BlockID, maxBlockID)
		if len(b.ContextElements.Elements) > maxContextElements {
			b.ContextElements.Elements = b.ContextElements.Elements[:maxContextElements]
		}
		for _, e := range b.ContextElements.Elements {
			if t, ok := e.(*slackgo.TextBlockObject); ok {
				fitText(t, maxContextText)
			}
		}
	case *slackgo.ActionBlock:
		b.BlockID = shortID(b.BlockID, maxBlockID)
		if b.Elements == nil {
			return
		}
		for _, e := range b.Elements.ElementSet {
			if btn, ok := e.(*slackgo.ButtonBlockElement); ok {
				btn.ActionID = shortID(btn.ActionID, maxActionID)
				fitText(btn.Text, maxButtonText)
			}
		}
	}
}

func fitText(t *slackgo.TextBlockObject, limit int) {
	if t == nil {
		return
	}
	if t.Type == slackgo.PlainTextType {
		t.Text = plainLimited(t.Text, limit)
		return
	}
	t.Text = cutMrkdwn(t.Text, limit)
}

// shrinkBlocksText cuts the longest mrkdwn texts (sections, fields,
// context) until all the blocks' text fits budget. Buttons are left alone:
// renderPrompt already sized them to fit.
func shrinkBlocksText(blocks []slackgo.Block, budget int) {
	for range 64 {
		texts := mrkdwnTexts(blocks)
		total := blocksTextLen(blocks)
		if total <= budget || len(texts) == 0 {
			return
		}
		longest := texts[0]
		for _, t := range texts[1:] {
			if textLen(t.Text) > textLen(longest.Text) {
				longest = t
			}
		}
		n := textLen(longest.Text)
		if n <= 200 {
			return // nothing long left to cut
		}
		longest.Text = cutMrkdwn(longest.Text, max(200, n-(total-budget)))
	}
}

// mrkdwnTexts are the blocks' mrkdwn text objects (sections, fields,
// context), the ones shrinkBlocksText may cut.
func mrkdwnTexts(blocks []slackgo.Block) []*slackgo.TextBlockObject {
	var out []*slackgo.TextBlockObject
	for _, t := range textObjects(blocks) {
		if t.Type == slackgo.MarkdownType {
			out = append(out, t)
		}
	}
	return out
}

// blocksTextLen is the length of all the text in blocks (what
// msg_blocks_too_long counts).
func blocksTextLen(blocks []slackgo.Block) int {
	n := 0
	for _, t := range textObjects(blocks) {
		n += textLen(t.Text)
	}
	return n
}

// textObjects lists every text object of the block types nanohost posts.
func textObjects(blocks []slackgo.Block) []*slackgo.TextBlockObject {
	var out []*slackgo.TextBlockObject
	add := func(t *slackgo.TextBlockObject) {
		if t != nil {
			out = append(out, t)
		}
	}
	for _, b := range blocks {
		switch b := b.(type) {
		case *slackgo.SectionBlock:
			add(b.Text)
			for _, f := range b.Fields {
				add(f)
			}
		case *slackgo.HeaderBlock:
			add(b.Text)
		case *slackgo.ContextBlock:
			for _, e := range b.ContextElements.Elements {
				if t, ok := e.(*slackgo.TextBlockObject); ok {
					add(t)
				}
			}
		case *slackgo.ActionBlock:
			if b.Elements != nil {
				for _, e := range b.Elements.ElementSet {
					if btn, ok := e.(*slackgo.ButtonBlockElement); ok {
						add(btn.Text)
					}
				}
			}
		}
	}
	return out
}

// cutMrkdwn cuts escaped mrkdwn to limit characters, ending with "…". It
// never ends inside an entity (&amp;) or a <…> token (a mention, a link),
// and closes a ``` code block the cut left open.
func cutMrkdwn(s string, limit int) string {
	if textLen(s) <= limit {
		return s
	}
	kept := cutUnits(s, limit-textLen("…")-len(closeFence))
	for {
		i := strings.LastIndexAny(kept, "&<")
		if i < 0 {
			break
		}
		if tail := kept[i:]; tail[0] == '&' && strings.Contains(tail, ";") || tail[0] == '<' && strings.Contains(tail, ">") {
			break
		}
		kept = kept[:i]
	}
	if strings.Count(kept, "```")%2 == 1 {
		kept += closeFence
	}
	return kept + "…"
}

// cutUnits returns the longest prefix of s at most n UTF-16 code units long.
func cutUnits(s string, n int) string {
	used := 0
	for i, r := range s {
		if used += utf16.RuneLen(r); used > n {
			return s[:i]
		}
	}
	return s
}

// shortID keeps a block_id or action_id within limit bytes: a longer one
// is cut and ends with a hash of the whole, so two ids that differ only
// past the cut stay different.
func shortID(id string, limit int) string {
	if len(id) <= limit {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	suffix := "~" + hex.EncodeToString(sum[:8])
	return strings.ToValidUTF8(id[:limit-len(suffix)], "") + suffix
}
