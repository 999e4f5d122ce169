package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"nanohost/internal/lease"
)

// Chat is a conversation the host has seen on a channel: a Slack channel
// or DM, the console.
type Chat struct {
	ID      string `json:"id"`
	Channel string `json:"channel"` // "slack", "console", …
	Name    string `json:"name,omitempty"`
	// GroupFolder is the group this chat's messages are routed to ("": none).
	// It is set by CreateGroup (for the group's home chat) and LinkChat.
	GroupFolder string    `json:"group,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// Group is a registered agent group: a folder of files and memory, bound
// to a home chat.
type Group struct {
	Folder string `json:"folder"`
	Name   string `json:"name"`
	// ChatID is the home chat; it must have been saved with UpsertChat.
	ChatID    string    `json:"chat"`
	Trigger   string    `json:"trigger,omitempty"` // e.g. "@Andy"
	IsMain    bool      `json:"is_main"`
	CreatedAt time.Time `json:"created_at"`
}

// validFolder keeps group folders safe to use as directory names.
var validFolder = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

// UpsertChat saves a chat's metadata (channel, name), creating it if new.
// It does not change the chat's group link.
func (s *Store) UpsertChat(ctx context.Context, c Chat) error {
	if c.ID == "" || c.Channel == "" {
		return fmt.Errorf("upsert chat: ID and Channel are required (got %q, %q)", c.ID, c.Channel)
	}
	now := encTime(time.Now())
	err := s.write(ctx, func(tx *txn) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO chats (chat_id, channel, name, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (chat_id) DO UPDATE SET channel = excluded.channel, name = excluded.name,
				updated_at = excluded.updated_at`,
			c.ID, c.Channel, c.Name, now, now)
		return err
	})
	if err != nil {
		return fmt.Errorf("upsert chat %s: %w", c.ID, err)
	}
	return nil
}

const chatColumns = `chat_id, channel, name, coalesce(group_folder, ''), created_at, updated_at`

func scanChat(row rowScanner) (Chat, error) {
	var c Chat
	err := row.Scan(&c.ID, &c.Channel, &c.Name, &c.GroupFolder, timeCol{&c.CreatedAt}, timeCol{&c.UpdatedAt})
	return c, err
}

// GetChat returns one chat.
func (s *Store) GetChat(ctx context.Context, id string) (Chat, error) {
	c, err := scanChat(s.reader.QueryRowContext(ctx, `SELECT `+chatColumns+` FROM chats WHERE chat_id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Chat{}, fmt.Errorf("get chat: chat %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return Chat{}, fmt.Errorf("get chat %s: %w", id, err)
	}
	return c, nil
}

// ListChats returns every chat, by id.
func (s *Store) ListChats(ctx context.Context) ([]Chat, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT `+chatColumns+` FROM chats ORDER BY chat_id`)
	if err != nil {
		return nil, fmt.Errorf("list chats: %w", err)
	}
	defer rows.Close()
	var chats []Chat
	for rows.Next() {
		c, err := scanChat(rows)
		if err != nil {
			return nil, fmt.Errorf("list chats: %w", err)
		}
		chats = append(chats, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list chats: %w", err)
	}
	return chats, nil
}

// LinkChat routes a chat's messages to a group (folder "" unlinks it).
func (s *Store) LinkChat(ctx context.Context, chatID, folder string) error {
	var target any
	if folder != "" {
		target = folder
	}
	err := s.write(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `UPDATE chats SET group_folder = ?, updated_at = ? WHERE chat_id = ?`,
			target, encTime(time.Now()), chatID)
		if s.violated(err, foreignKeyViolation) {
			return fmt.Errorf("group %q: %w", folder, ErrNotFound)
		}
		if err != nil {
			return err
		}
		return requireOneRow(res, "chat", chatID)
	})
	if err != nil {
		return fmt.Errorf("link chat %s to group %q: %w", chatID, folder, err)
	}
	return nil
}

// CreateGroup registers a group on its home chat (saved before with
// UpsertChat) and routes that chat to it. Folder must be a safe directory
// name; at most one group is main.
func (s *Store) CreateGroup(ctx context.Context, g Group) error {
	if err := checkGroup(g); err != nil {
		return fmt.Errorf("create group: %w", err)
	}
	if g.CreatedAt.IsZero() {
		g.CreatedAt = time.Now()
	}
	err := s.write(ctx, func(tx *txn) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO groups (folder, name, chat_id, trigger_pattern, is_main, created_at)
			VALUES (?, ?, ?, ?, ?, ?)`, g.Folder, g.Name, g.ChatID, g.Trigger, g.IsMain, encTime(g.CreatedAt))
		if err := s.explainGroupConstraint(err, g); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE chats SET group_folder = ?, updated_at = ? WHERE chat_id = ?`,
			g.Folder, encTime(time.Now()), g.ChatID)
		return err
	})
	if err != nil {
		return fmt.Errorf("create group %s: %w", g.Folder, err)
	}
	return nil
}

func checkGroup(g Group) error {
	if !validFolder.MatchString(g.Folder) {
		return fmt.Errorf("folder %q: use 1-64 letters, digits, '-' or '_', starting with a letter or digit", g.Folder)
	}
	if g.Name == "" || g.ChatID == "" {
		return fmt.Errorf("group %s: Name and ChatID are required", g.Folder)
	}
	return nil
}

func (s *Store) explainGroupConstraint(err error, g Group) error {
	if err == nil {
		return nil
	}
	kind, constraint := s.b.violation(err)
	switch kind {
	case primaryKeyViolation:
		return fmt.Errorf("group %q: %w", g.Folder, ErrExists)
	case foreignKeyViolation:
		return fmt.Errorf("chat %q is unknown (save it with UpsertChat first): %w", g.ChatID, ErrNotFound)
	case uniqueViolation:
		// SQLite names the column (groups.is_main), PostgreSQL the index.
		if strings.Contains(constraint, "is_main") || strings.Contains(constraint, "one_main") {
			return fmt.Errorf("another group is already main (unset it first): %w", ErrExists)
		}
		return fmt.Errorf("chat %q already is the home chat of another group: %w", g.ChatID, ErrExists)
	}
	return err
}

// UpdateGroup changes a group's name, home chat, trigger and main flag.
// The new home chat is routed to the group; a previous home chat stays
// routed to it until LinkChat(old, "").
func (s *Store) UpdateGroup(ctx context.Context, g Group) error {
	if err := checkGroup(g); err != nil {
		return fmt.Errorf("update group: %w", err)
	}
	err := s.write(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `UPDATE groups SET name = ?, chat_id = ?, trigger_pattern = ?, is_main = ?
			WHERE folder = ?`, g.Name, g.ChatID, g.Trigger, g.IsMain, g.Folder)
		if err := s.explainGroupConstraint(err, g); err != nil {
			return err
		}
		if err := requireOneRow(res, "group", g.Folder); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE chats SET group_folder = ?, updated_at = ? WHERE chat_id = ?`,
			g.Folder, encTime(time.Now()), g.ChatID)
		return err
	})
	if err != nil {
		return fmt.Errorf("update group %s: %w", g.Folder, err)
	}
	return nil
}

// DeleteGroup unregisters a group: its sessions go, its chats are
// unlinked, its runs stay in the history.
func (s *Store) DeleteGroup(ctx context.Context, folder string) error {
	err := s.write(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM groups WHERE folder = ?`, folder)
		if err != nil {
			return err
		}
		if err := requireOneRow(res, "group", folder); err != nil {
			return err
		}
		// Its conversation's lease goes with it (leases name no table).
		_, err = tx.ExecContext(ctx, `DELETE FROM leases WHERE kind = ? AND key = ?`, lease.Group, folder)
		return err
	})
	if err != nil {
		return fmt.Errorf("delete group %s: %w", folder, err)
	}
	return nil
}

const groupColumns = `g.folder, g.name, g.chat_id, g.trigger_pattern, g.is_main, g.created_at`

func scanGroup(row rowScanner) (Group, error) {
	var g Group
	err := row.Scan(&g.Folder, &g.Name, &g.ChatID, &g.Trigger, &g.IsMain, timeCol{&g.CreatedAt})
	return g, err
}

// GetGroup returns one group.
func (s *Store) GetGroup(ctx context.Context, folder string) (Group, error) {
	g, err := scanGroup(s.reader.QueryRowContext(ctx, `SELECT `+groupColumns+` FROM groups g WHERE g.folder = ?`, folder))
	if errors.Is(err, sql.ErrNoRows) {
		return Group{}, fmt.Errorf("get group: group %q: %w", folder, ErrNotFound)
	}
	if err != nil {
		return Group{}, fmt.Errorf("get group %s: %w", folder, err)
	}
	return g, nil
}

// GroupByChat returns the group a chat's messages are routed to.
func (s *Store) GroupByChat(ctx context.Context, chatID string) (Group, error) {
	g, err := scanGroup(s.reader.QueryRowContext(ctx, `SELECT `+groupColumns+`
		FROM chats c JOIN groups g ON g.folder = c.group_folder WHERE c.chat_id = ?`, chatID))
	if errors.Is(err, sql.ErrNoRows) {
		return Group{}, fmt.Errorf("group of chat %q: %w", chatID, ErrNotFound)
	}
	if err != nil {
		return Group{}, fmt.Errorf("group of chat %s: %w", chatID, err)
	}
	return g, nil
}

// ListGroups returns every group, main first, then by folder.
func (s *Store) ListGroups(ctx context.Context) ([]Group, error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT `+groupColumns+` FROM groups g ORDER BY g.is_main DESC, g.folder`)
	if err != nil {
		return nil, fmt.Errorf("list groups: %w", err)
	}
	defer rows.Close()
	var groups []Group
	for rows.Next() {
		g, err := scanGroup(rows)
		if err != nil {
			return nil, fmt.Errorf("list groups: %w", err)
		}
		groups = append(groups, g)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list groups: %w", err)
	}
	return groups, nil
}
