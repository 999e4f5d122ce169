package store

import (
	"context"
	"fmt"
	"time"
)

// Direction says whether a message came into the host or went out.
type Direction string

const (
	Inbound  Direction = "in"
	Outbound Direction = "out"
)

// Message is one chat message the host received or sent.
type Message struct {
	ID     int64  `json:"id"` // assigned by the store
	ChatID string `json:"chat"`
	// ChannelMsgID is the channel's own message id (Slack ts); together
	// with ChatID it identifies the message, so redeliveries are dropped.
	ChannelMsgID string    `json:"channel_msg_id"`
	ThreadTS     string    `json:"thread_ts,omitempty"` // root of its thread ("": none)
	UserID       string    `json:"user,omitempty"`
	Text         string    `json:"text"`
	TS           time.Time `json:"ts"` // when it was sent
	Direction    Direction `json:"direction"`
	CreatedAt    time.Time `json:"created_at"` // when it was stored
	// ProcessedAt is when the host finished with an inbound message (zero:
	// not yet). SaveMessage stores it as given: a message that needs no
	// answer is saved processed, one queued for the agent unprocessed.
	ProcessedAt time.Time `json:"processed_at,omitzero"`
}

// SaveMessage stores a message of a known chat (UpsertChat first) and
// reports whether it was new: a message already stored under the same
// (ChatID, ChannelMsgID) — a channel redelivery — is ignored.
func (s *Store) SaveMessage(ctx context.Context, m Message) (saved bool, err error) {
	if m.ChatID == "" || m.ChannelMsgID == "" {
		return false, fmt.Errorf("save message: ChatID and ChannelMsgID are required (got %q, %q)", m.ChatID, m.ChannelMsgID)
	}
	if m.Direction != Inbound && m.Direction != Outbound {
		return false, fmt.Errorf("save message %s: direction %q (want %q or %q)", m.ChannelMsgID, m.Direction, Inbound, Outbound)
	}
	now := time.Now()
	if m.TS.IsZero() {
		m.TS = now
	}
	err = s.write(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO messages (chat_id, channel_msg_id, thread_ts, user_id,
			text, ts, direction, created_at, processed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (chat_id, channel_msg_id) DO NOTHING`,
			m.ChatID, m.ChannelMsgID, m.ThreadTS, m.UserID, m.Text, encTime(m.TS), m.Direction, encTime(now), encOptTime(m.ProcessedAt))
		if s.violated(err, foreignKeyViolation) {
			return fmt.Errorf("chat %q is unknown (save it with UpsertChat first): %w", m.ChatID, ErrNotFound)
		}
		if err != nil {
			return err
		}
		n, _ := res.RowsAffected()
		saved = n == 1
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("save message %s in chat %s: %w", m.ChannelMsgID, m.ChatID, err)
	}
	return saved, nil
}

const messageColumns = `id, chat_id, channel_msg_id, thread_ts, user_id, text, ts, direction, created_at, processed_at`

// MessagesSince returns a chat's messages sent after since, oldest first,
// at most limit (limit <= 0: all): the conversation an agent has not seen.
func (s *Store) MessagesSince(ctx context.Context, chatID string, since time.Time, limit int) ([]Message, error) {
	return s.queryMessages(ctx, "messages of chat "+chatID, `SELECT `+messageColumns+` FROM messages
		WHERE chat_id = ? AND ts > ? ORDER BY ts, id LIMIT ?`, chatID, encTime(since), s.limit(limit))
}

// ThreadMessages returns the replies in a thread, oldest first.
func (s *Store) ThreadMessages(ctx context.Context, chatID, threadTS string) ([]Message, error) {
	return s.queryMessages(ctx, "messages of thread "+threadTS, `SELECT `+messageColumns+` FROM messages
		WHERE chat_id = ? AND thread_ts = ? AND thread_ts <> '' ORDER BY ts, id`, chatID, threadTS)
}

func (s *Store) queryMessages(ctx context.Context, what, query string, args ...any) ([]Message, error) {
	rows, err := s.reader.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	var msgs []Message
	for rows.Next() {
		var m Message
		if err := rows.Scan(&m.ID, &m.ChatID, &m.ChannelMsgID, &m.ThreadTS, &m.UserID, &m.Text,
			timeCol{&m.TS}, &m.Direction, timeCol{&m.CreatedAt}, timeCol{&m.ProcessedAt}); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		msgs = append(msgs, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return msgs, nil
}
