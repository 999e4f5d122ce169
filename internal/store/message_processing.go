package store

import (
	"context"
	"fmt"
	"time"
)

// An inbound message is stored before the host acts on it, unprocessed,
// and marked processed once the host has dealt with it (the agent's reply
// is posted). Whatever is still unprocessed at start-up was in flight when
// a previous instance stopped — queued for the agent, or being answered —
// and is queued again, so a message is neither lost nor answered twice.

// MarkMessageProcessed marks inbound messages of a chat as processed and
// returns how many were not yet. Marking again keeps the first time, and
// unknown ids are ignored (the message may predate the store).
func (s *Store) MarkMessageProcessed(ctx context.Context, chatID string, channelMsgIDs ...string) (marked int, err error) {
	if len(channelMsgIDs) == 0 {
		return 0, nil
	}
	now := encTime(time.Now())
	err = s.write(ctx, func(tx *txn) error {
		for _, id := range channelMsgIDs {
			res, err := tx.ExecContext(ctx, `UPDATE messages SET processed_at = ?
				WHERE chat_id = ? AND channel_msg_id = ? AND processed_at IS NULL`, now, chatID, id)
			if err != nil {
				return err
			}
			n, _ := res.RowsAffected()
			marked += int(n)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("mark messages of chat %s processed: %w", chatID, err)
	}
	return marked, nil
}

// UnprocessedMessages returns every inbound message not processed yet, of
// every chat, in the order they were stored.
func (s *Store) UnprocessedMessages(ctx context.Context) ([]Message, error) {
	return s.queryMessages(ctx, "unprocessed messages", `SELECT `+messageColumns+` FROM messages
		WHERE processed_at IS NULL AND direction = 'in' ORDER BY id`)
}
