package slack

import (
	"context"
	"fmt"
	"maps"

	"nanohost/internal/channels"
)

// rememberedGates bounds the gate ids and follow-up pages kept in memory.
const rememberedGates = 1024

// promptMemory is what the channel remembers of the gate prompts it
// posted: a gate id too long for its buttons' values (by the posting's
// nonce), and a prompt's follow-up pages (by chat and ts), to take their
// buttons away once it is settled. It is lost on a restart; a restarted
// run asks its gate again with a new nonce, and the old buttons answer
// nothing.
type promptMemory struct {
	gateIDs   map[string]string
	followUps map[string][]string
}

func (c *Channel) gateOf(nonce string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.prompts.gateIDs[nonce]
}

func (c *Channel) rememberGate(nonce, gateID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.prompts.gateIDs == nil || len(c.prompts.gateIDs) >= rememberedGates {
		c.prompts.gateIDs = make(map[string]string)
	}
	c.prompts.gateIDs[nonce] = gateID
}

func (c *Channel) rememberFollowUps(chat, ts string, pages []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.prompts.followUps == nil || len(c.prompts.followUps) >= rememberedGates {
		c.prompts.followUps = make(map[string][]string)
	}
	c.prompts.followUps[chat+"/"+ts] = pages
}

func (c *Channel) takeFollowUps(chat, ts string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	pages := c.prompts.followUps[chat+"/"+ts]
	delete(c.prompts.followUps, chat+"/"+ts)
	return pages
}

// postPrompt posts a gate prompt: its first page, which is the message the
// gate is settled on, then the pages with the choices one message could
// not hold, in its thread.
func (c *Channel) postPrompt(ctx context.Context, chat, thread string, m channels.Message) (string, error) {
	p := *m.Gate
	if longGateID(p) {
		c.rememberGate(p.Nonce, p.GateID)
	}
	pages := renderPromptPages(p, m.Links)
	label := c.postLabel(m)
	out := c.outboxFor(chat)
	ts, err := out.do(ctx, &op{kind: opPost, chat: chat, thread: thread, msg: pages[0], label: label})
	if err != nil || len(pages) == 1 {
		return ts, err
	}
	under := thread
	if under == "" {
		under = ts
	}
	var more []string
	for i, page := range pages[1:] {
		pageLabel := maps.Clone(label)
		pageLabel["key"] = fmt.Sprintf("%s/page%d", labelKey(label), i+1)
		pageTS, err := out.do(ctx, &op{kind: opPost, chat: chat, thread: under, msg: page, label: pageLabel})
		if err != nil {
			c.log.Error("slack: a page of a gate prompt's choices was not posted; those choices can be answered on the web dashboard",
				"run", p.RunID, "gate", p.GateID, "page", i+2, "of", len(pages), "err", err)
			break
		}
		more = append(more, pageTS)
	}
	c.rememberFollowUps(chat, ts, more)
	return ts, nil
}

// settleFollowUps takes the buttons off a settled prompt's follow-up pages.
func (c *Channel) settleFollowUps(ctx context.Context, chat, ts string) {
	for _, page := range c.takeFollowUps(chat, ts) {
		if _, err := c.outboxFor(chat).do(ctx, &op{kind: opUpdate, chat: chat, ts: page, msg: renderSettledPage()}); err != nil {
			c.log.Warn("slack: edit a settled prompt's page", "chat", chat, "msg", page, "err", err)
		}
	}
}
