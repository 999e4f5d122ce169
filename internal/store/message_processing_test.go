package store

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

func TestUnprocessedMessagesSurviveReopenUntilMarked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nanohost.db")
	ctx := context.Background()
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	s.UpsertChat(ctx, Chat{ID: "C1", Channel: "slack"})
	s.UpsertChat(ctx, Chat{ID: "C2", Channel: "slack"})
	now := time.Now()
	for _, m := range []Message{
		{ChatID: "C1", ChannelMsgID: "1.1", Text: "queued first", Direction: Inbound},
		{ChatID: "C1", ChannelMsgID: "1.2", Text: "no answer needed", Direction: Inbound, ProcessedAt: now},
		{ChatID: "C2", ChannelMsgID: "2.1", Text: "queued in another chat", Direction: Inbound},
		{ChatID: "C1", ChannelMsgID: "1.3", Text: "the agent's reply", Direction: Outbound},
		{ChatID: "C1", ChannelMsgID: "1.4", ThreadTS: "1.1", Text: "queued follow-up", Direction: Inbound},
	} {
		if _, err := s.SaveMessage(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()

	// A new instance (after a crash) finds what was in flight, in order.
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.UnprocessedMessages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ids := msgIDs(got); ids != "1.1 2.1 1.4" {
		t.Fatalf("unprocessed after reopen = %s, want the three queued inbound messages in order (1.1 2.1 1.4)", ids)
	}
	if got[2].ThreadTS != "1.1" || got[0].ProcessedAt != (time.Time{}) {
		t.Errorf("unprocessed message lost its fields: %+v", got)
	}

	if n, err := s.MarkMessageProcessed(ctx, "C1", "1.1", "1.4", "9.9"); err != nil || n != 2 {
		t.Fatalf("MarkMessageProcessed = %d, %v; want 2 (the unknown id ignored)", n, err)
	}
	if n, _ := s.MarkMessageProcessed(ctx, "C1", "1.1"); n != 0 {
		t.Errorf("marking a processed message again counted %d, want 0", n)
	}
	// The chat matters: 2.1 is C2's.
	if n, _ := s.MarkMessageProcessed(ctx, "C1", "2.1"); n != 0 {
		t.Errorf("marked another chat's message")
	}
	got, _ = s.UnprocessedMessages(ctx)
	if ids := msgIDs(got); ids != "2.1" {
		t.Errorf("unprocessed after marking = %s, want 2.1", ids)
	}
	all, _ := s.MessagesSince(ctx, "C1", time.Time{}, 0)
	for _, m := range all {
		if m.Direction == Inbound && m.ProcessedAt.IsZero() {
			t.Errorf("message %s still unprocessed", m.ChannelMsgID)
		}
	}
}

// A database from before the processed marker: every message it holds was
// handled by the instance that stored it, so none is answered again.
func TestMigrationMarksEarlierMessagesProcessed(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v3.db")
	ms, err := loadMigrations(sqliteBackend{}.migrations())
	if err != nil {
		t.Fatal(err)
	}
	db := openRawWriter(t, path)
	if err := migrate(ctx, sqliteBackend{}, db, ms[:3]); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO chats (chat_id, channel, name, created_at, updated_at) VALUES ('C1', 'slack', 'dev', '2025-01-01T00:00:00.000000000Z', '2025-01-01T00:00:00.000000000Z')`,
		`INSERT INTO messages (chat_id, channel_msg_id, text, ts, direction, created_at) VALUES ('C1', '1.1', 'old', '2025-01-01T00:00:00.000000000Z', 'in', '2025-01-01T00:00:01.000000000Z')`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()

	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, err := s.UnprocessedMessages(ctx); err != nil || len(got) != 0 {
		t.Errorf("after upgrading, earlier messages are unprocessed: %+v, %v", got, err)
	}
	all, _ := s.MessagesSince(ctx, "C1", time.Time{}, 0)
	if len(all) != 1 || !all[0].ProcessedAt.Equal(all[0].CreatedAt) {
		t.Errorf("earlier message = %+v, want processed at its storing time", all)
	}
}

func msgIDs(ms []Message) string {
	out := ""
	for i, m := range ms {
		if i > 0 {
			out += " "
		}
		out += m.ChannelMsgID
	}
	return out
}
