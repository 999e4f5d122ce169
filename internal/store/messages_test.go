package store

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestMessages(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		s.UpsertChat(ctx, Chat{ID: "C1", Channel: "slack"})
		base := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
		msgs := []Message{
			{ChatID: "C1", ChannelMsgID: "100.1", UserID: "U1", Text: "hi", TS: base, Direction: Inbound},
			{ChatID: "C1", ChannelMsgID: "100.2", ThreadTS: "100.1", Text: "hello", TS: base.Add(time.Second), Direction: Outbound},
			{ChatID: "C1", ChannelMsgID: "100.3", ThreadTS: "100.1", UserID: "U2", Text: "run it", TS: base.Add(2 * time.Second), Direction: Inbound},
		}
		for _, m := range msgs {
			if saved, err := s.SaveMessage(ctx, m); err != nil || !saved {
				t.Fatalf("save %s: %v %v", m.ChannelMsgID, saved, err)
			}
		}
		// A redelivered message is dropped.
		redelivered := msgs[0]
		redelivered.Text = "hi (edited)"
		if saved, err := s.SaveMessage(ctx, redelivered); err != nil || saved {
			t.Errorf("redelivery: saved=%v err=%v, want dropped", saved, err)
		}
		since, err := s.MessagesSince(ctx, "C1", base, 0)
		if err != nil || len(since) != 2 || since[0].ChannelMsgID != "100.2" || since[0].Direction != Outbound {
			t.Errorf("MessagesSince = %+v, %v", since, err)
		}
		all, _ := s.MessagesSince(ctx, "C1", time.Time{}, 0)
		if len(all) != 3 || all[0].Text != "hi" || all[0].ID == 0 || all[0].CreatedAt.IsZero() {
			t.Errorf("all messages = %+v", all)
		}
		if one, _ := s.MessagesSince(ctx, "C1", time.Time{}, 1); len(one) != 1 {
			t.Errorf("limit 1 returned %d", len(one))
		}
		thread, _ := s.ThreadMessages(ctx, "C1", "100.1")
		if len(thread) != 2 || thread[1].UserID != "U2" {
			t.Errorf("ThreadMessages = %+v", thread)
		}
		if _, err := s.SaveMessage(ctx, Message{ChatID: "C404", ChannelMsgID: "1", Direction: Inbound}); !errors.Is(err, ErrNotFound) {
			t.Errorf("message in unknown chat: %v", err)
		}
		if _, err := s.SaveMessage(ctx, Message{ChatID: "C1", ChannelMsgID: "1", Direction: "sideways"}); err == nil {
			t.Error("bad direction accepted")
		}
	})
}
