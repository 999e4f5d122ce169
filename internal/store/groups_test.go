package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func seedChatAndGroup(t *testing.T, s *Store, chat, folder string, main bool) {
	t.Helper()
	ctx := context.Background()
	if err := s.UpsertChat(ctx, Chat{ID: chat, Channel: "slack", Name: "#" + folder}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateGroup(ctx, Group{Folder: folder, Name: strings.ToUpper(folder), ChatID: chat, Trigger: "@Andy", IsMain: main}); err != nil {
		t.Fatal(err)
	}
}

func TestChats(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		if err := s.UpsertChat(ctx, Chat{ID: "C1", Channel: "slack", Name: "#dev"}); err != nil {
			t.Fatal(err)
		}
		first, _ := s.GetChat(ctx, "C1")
		time.Sleep(2 * time.Millisecond)
		if err := s.UpsertChat(ctx, Chat{ID: "C1", Channel: "slack", Name: "#engineering"}); err != nil {
			t.Fatal(err)
		}
		c, err := s.GetChat(ctx, "C1")
		if err != nil || c.Name != "#engineering" || !c.CreatedAt.Equal(first.CreatedAt) || !c.UpdatedAt.After(first.UpdatedAt) {
			t.Errorf("after rename: %+v (first %+v), %v", c, first, err)
		}
		if err := s.UpsertChat(ctx, Chat{ID: "C2"}); err == nil {
			t.Error("chat without channel accepted")
		}
		if _, err := s.GetChat(ctx, "nope"); !errors.Is(err, ErrNotFound) {
			t.Errorf("GetChat unknown: %v", err)
		}
		s.UpsertChat(ctx, Chat{ID: "A0", Channel: "console"})
		chats, _ := s.ListChats(ctx)
		if len(chats) != 2 || chats[0].ID != "A0" {
			t.Errorf("ListChats = %+v", chats)
		}
	})
}

func TestGroupsCRUD(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		seedChatAndGroup(t, s, "C1", "main", true)
		seedChatAndGroup(t, s, "C2", "ops", false)

		g, err := s.GetGroup(ctx, "main")
		if err != nil || g.Name != "MAIN" || g.ChatID != "C1" || g.Trigger != "@Andy" || !g.IsMain || g.CreatedAt.IsZero() {
			t.Errorf("GetGroup = %+v, %v", g, err)
		}
		if g, err := s.GroupByChat(ctx, "C2"); err != nil || g.Folder != "ops" {
			t.Errorf("GroupByChat(C2) = %+v, %v", g, err)
		}
		if c, _ := s.GetChat(ctx, "C2"); c.GroupFolder != "ops" {
			t.Errorf("CreateGroup did not route its chat: %+v", c)
		}
		groups, _ := s.ListGroups(ctx)
		if len(groups) != 2 || groups[0].Folder != "main" {
			t.Errorf("ListGroups = %+v, want main first", groups)
		}

		// A second chat routed to ops.
		s.UpsertChat(ctx, Chat{ID: "D9", Channel: "slack"})
		if err := s.LinkChat(ctx, "D9", "ops"); err != nil {
			t.Fatal(err)
		}
		if g, _ := s.GroupByChat(ctx, "D9"); g.Folder != "ops" {
			t.Errorf("linked chat routes to %q", g.Folder)
		}
		if err := s.LinkChat(ctx, "D9", "ghost"); !errors.Is(err, ErrNotFound) {
			t.Errorf("link to unknown group: %v", err)
		}

		g.Name, g.Trigger = "Main group", "@Bot"
		if err := s.UpdateGroup(ctx, g); err != nil {
			t.Fatal(err)
		}
		if g, _ := s.GetGroup(ctx, "main"); g.Name != "Main group" || g.Trigger != "@Bot" {
			t.Errorf("after update: %+v", g)
		}
		if err := s.UpdateGroup(ctx, Group{Folder: "ghost", Name: "x", ChatID: "C1"}); !errors.Is(err, ErrNotFound) {
			t.Errorf("update unknown: %v", err)
		}

		s.SetSession(ctx, "ops", "", "sess-ops")
		createTestRun(t, s, "r-ops")
		if err := s.DeleteGroup(ctx, "ops"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GroupByChat(ctx, "C2"); !errors.Is(err, ErrNotFound) {
			t.Errorf("chat still routed to a deleted group: %v", err)
		}
		if _, err := s.GetSession(ctx, "ops", ""); !errors.Is(err, ErrNotFound) {
			t.Errorf("deleted group's session survives: %v", err)
		}
		if _, err := s.GetRun(ctx, "r-ops"); err != nil {
			t.Errorf("run history lost with the group: %v", err)
		}
		if err := s.DeleteGroup(ctx, "ops"); !errors.Is(err, ErrNotFound) {
			t.Errorf("delete twice: %v", err)
		}
	})
}

func TestCreateGroupErrors(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		seedChatAndGroup(t, s, "C1", "main", true)
		s.UpsertChat(ctx, Chat{ID: "C2", Channel: "slack"})
		for name, tc := range map[string]struct {
			g    Group
			want string
			is   error
		}{
			"unsafe folder": {Group{Folder: "../etc", Name: "x", ChatID: "C2"}, "use 1-64 letters", nil},
			"no name":       {Group{Folder: "x", ChatID: "C2"}, "Name and ChatID are required", nil},
			"unknown chat":  {Group{Folder: "x", Name: "x", ChatID: "C404"}, "UpsertChat first", ErrNotFound},
			"same folder":   {Group{Folder: "main", Name: "x", ChatID: "C2"}, "already exists", ErrExists},
			"same chat":     {Group{Folder: "x", Name: "x", ChatID: "C1"}, "home chat of another group", ErrExists},
			"second main":   {Group{Folder: "x", Name: "x", ChatID: "C2", IsMain: true}, "already main", ErrExists},
		} {
			err := s.CreateGroup(ctx, tc.g)
			if err == nil || !strings.Contains(err.Error(), tc.want) || (tc.is != nil && !errors.Is(err, tc.is)) {
				t.Errorf("%s: %v, want %q (%v)", name, err, tc.want, tc.is)
			}
		}
	})
}
