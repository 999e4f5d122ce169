package slack

import (
	"context"
	"slices"
	"strings"
)

// neededScopes are the bot scopes the channel uses, each with what for:
// the ones every setup needs, and those the policy's conversations need to
// hear people talk there (Slack sends no message events without them, and
// says nothing about it).
func (c *Channel) neededScopes() map[string]string {
	need := map[string]string{
		"chat:write":        "posting run threads, status cards, gate prompts and replies",
		"commands":          "/pipeline and /schedule",
		"app_mentions:read": "@nanohost mentions",
		"users:read":        "showing who answered a gate",
	}
	if slices.ContainsFunc(slices.Concat(c.cfg.Policy.Starters, c.cfg.Policy.Approvers), func(p string) bool {
		return strings.HasPrefix(p, "group:")
	}) {
		need["usergroups:read"] = "group:S… entries of slack.policy"
	}
	for _, chat := range c.cfg.Policy.Channels {
		scope, where := historyScope(chat)
		need[scope] = "hearing thread replies (free-text gate answers, chat with the agent) in " + where + " such as " + chat
	}
	return need
}

// historyScope is the scope that reads messages in chat, by its id: C…
// public channels (a private channel created lately also has a C… id and
// needs groups:history, which the shipped manifest has too), G… private
// channels, D… direct messages.
func historyScope(chat string) (scope, where string) {
	switch {
	case strings.HasPrefix(chat, "G"):
		return "groups:history", "private channels"
	case strings.HasPrefix(chat, "D"):
		return "im:history", "direct messages"
	}
	return "channels:history", "channels"
}

// checkScopes compares the bot token's scopes (auth.test's X-OAuth-Scopes
// header; "" when Slack did not send it) with what the channel needs, and
// records what is missing for health checks and the log.
func (c *Channel) checkScopes(granted string) {
	if strings.TrimSpace(granted) == "" {
		return
	}
	have := strings.Split(strings.ReplaceAll(granted, " ", ""), ",")
	for scope, what := range c.neededScopes() {
		if slices.Contains(have, scope) {
			c.scopeFound(scope)
		} else {
			c.scopeMissing(scope, what)
		}
	}
}

// recheckScopes asks Slack for the bot token's scopes again while some are
// missing.
func (c *Channel) recheckScopes(ctx context.Context) {
	if len(c.State().MissingScopes) == 0 {
		return
	}
	resp, err := c.api.AuthTestContext(ctx)
	if err != nil {
		c.log.Debug("slack: scope recheck", "err", err)
		return
	}
	c.checkScopes(resp.Header.Get("X-OAuth-Scopes"))
}
