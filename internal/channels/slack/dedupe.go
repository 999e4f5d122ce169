package slack

import (
	"fmt"
	"time"

	slackgo "github.com/slack-go/slack"

	"nanohost/internal/channels"
)

// metadataEventType labels the messages nanohost posts (Slack message
// metadata), each with a key naming what it reports.
const metadataEventType = "nanohost_post"

// lookBack widens the search for a post that may have landed, against
// clock skew between this host and Slack.
const lookBack = 10 * time.Minute

// postLabel is the metadata a post carries. Its key says what the message
// reports — a run's status card, one event of a run, one posting of a gate
// prompt — so the same message posted again (a retry, a run's reporter
// started again) has the same key; other posts get a key of their own.
func (c *Channel) postLabel(m channels.Message) map[string]any {
	switch {
	case m.Gate != nil:
		return map[string]any{"key": "gate/" + m.Gate.RunID + "/" + m.Gate.Nonce, "run": m.Gate.RunID}
	case m.Card != nil:
		return map[string]any{"key": "card/" + m.Card.RunID, "run": m.Card.RunID}
	case m.RunID != "" && m.Seq > 0:
		return map[string]any{"key": fmt.Sprintf("event/%s/%d", m.RunID, m.Seq), "run": m.RunID, "seq": m.Seq}
	case m.AnswerTo != "":
		return map[string]any{"key": "answer/" + m.AnswerTo}
	}
	return map[string]any{"key": fmt.Sprintf("post/%s/%d", c.instance, c.posts.Add(1))}
}

func labelKey(label map[string]any) string {
	key, _ := label["key"].(string)
	return key
}

// landed looks for call's message in its thread (or at the top of its
// conversation) by its metadata key, and returns its ts ("" if it is not
// there).
func (o *outbox) landed(call *op) (string, error) {
	key := labelKey(call.label)
	since := call.since
	if since.IsZero() {
		since = time.Now()
	}
	oldest := fmt.Sprintf("%d.000000", since.Add(-lookBack).Unix())
	cursor := ""
	for {
		msgs, next, err := o.page(call, oldest, cursor)
		if err != nil {
			return "", err
		}
		for _, m := range msgs {
			if m.Metadata.EventType == metadataEventType && m.Metadata.EventPayload["key"] == key {
				return m.Timestamp, nil
			}
		}
		if next == "" {
			return "", nil
		}
		cursor = next
	}
}

// page reads one page of the thread's replies, or of the conversation's
// history for a top-level post, with the messages' metadata.
func (o *outbox) page(call *op, oldest, cursor string) ([]slackgo.Message, string, error) {
	method := "conversations.history"
	if call.thread != "" {
		method = "conversations.replies"
	}
	if err := o.c.rates.wait(call.ctx, o.life, method); err != nil {
		return nil, "", err
	}
	scope, where := historyScope(call.chat)
	if call.thread != "" {
		msgs, more, next, err := o.c.api.GetConversationRepliesContext(call.ctx, &slackgo.GetConversationRepliesParameters{
			ChannelID: call.chat, Timestamp: call.thread, Oldest: oldest, Inclusive: true, Limit: 200, Cursor: cursor, IncludeAllMetadata: true})
		if err != nil {
			return nil, "", o.lookupFailed(method, scope, where, err)
		}
		o.c.scopeFound(scope)
		if !more {
			next = ""
		}
		return msgs, next, nil
	}
	resp, err := o.c.api.GetConversationHistoryContext(call.ctx, &slackgo.GetConversationHistoryParameters{
		ChannelID: call.chat, Oldest: oldest, Inclusive: true, Limit: 200, Cursor: cursor, IncludeAllMetadata: true})
	if err != nil {
		return nil, "", o.lookupFailed(method, scope, where, err)
	}
	o.c.scopeFound(scope)
	next := resp.ResponseMetaData.NextCursor
	if !resp.HasMore {
		next = ""
	}
	return resp.Messages, next, nil
}

func (o *outbox) lookupFailed(method, scope, where string, err error) error {
	if kind, _ := classify(o.life, err); kind == failScope {
		o.c.scopeMissing(scope, "checking whether a post landed after a lost answer, in "+where)
		return scopeError(method, err)
	}
	return fmt.Errorf("%s: %w", method, err)
}
