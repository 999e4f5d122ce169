package store

import (
	"context"
	"errors"
	"testing"
)

func TestSessions(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		seedChatAndGroup(t, s, "C1", "main", true)
		if _, err := s.GetSession(ctx, "main", ""); !errors.Is(err, ErrNotFound) {
			t.Errorf("no session yet: %v", err)
		}
		s.SetSession(ctx, "main", "", "sess-1")
		s.SetSession(ctx, "main", "run-7", "sess-thread")
		if err := s.SetSession(ctx, "main", "", "sess-2"); err != nil {
			t.Fatal(err)
		}
		if id, _ := s.GetSession(ctx, "main", ""); id != "sess-2" {
			t.Errorf("main session %q, want sess-2", id)
		}
		if id, _ := s.GetSession(ctx, "main", "run-7"); id != "sess-thread" {
			t.Errorf("thread session %q", id)
		}
		if err := s.DeleteSession(ctx, "main", "run-7"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetSession(ctx, "main", "run-7"); !errors.Is(err, ErrNotFound) {
			t.Errorf("deleted session: %v", err)
		}
		if err := s.SetSession(ctx, "ghost", "", "s"); !errors.Is(err, ErrNotFound) {
			t.Errorf("session of unknown group: %v", err)
		}
		if err := s.SetSession(ctx, "main", "", ""); err == nil {
			t.Error("empty session id accepted")
		}
	})
}
