package slacktest

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"time"
)

// Message is a message in the fake workspace, as it stands now.
type Message struct {
	Channel  string
	TS       string
	ThreadTS string // the thread's root ts for a reply, "" at top level
	User     string
	BotID    string // set for the bot's own messages
	Text     string
	Blocks   json.RawMessage
	// Metadata is the message metadata the app attached, as posted.
	Metadata json.RawMessage
	// Revisions are the earlier versions, oldest first (one per chat.update).
	Revisions []Revision
	PostedAt  time.Time
}

// Revision is an earlier version of an edited message.
type Revision struct {
	Text     string
	Blocks   json.RawMessage
	Replaced time.Time
}

// Ephemeral is a message only one user saw.
type Ephemeral struct {
	Channel  string
	User     string
	ThreadTS string
	Text     string
	Blocks   json.RawMessage
	At       time.Time
	// InAck is set for a slash command's response sent in its ack rather
	// than with chat.postEphemeral.
	InAck bool
}

// Button is a button as rendered in a message's blocks.
type Button struct {
	ActionID string
	BlockID  string
	Value    string
	Text     string
}

// FromBot reports whether the bot posted the message.
func (m Message) FromBot() bool { return m.BotID != "" }

// Content is everything a person can read in the message: its text and the
// text of its blocks.
func (m Message) Content() string {
	var b strings.Builder
	b.WriteString(m.Text)
	for _, t := range blockTexts(m.Blocks) {
		b.WriteString("\n")
		b.WriteString(t)
	}
	return b.String()
}

// BlockText is the readable text of the blocks only (what Slack shows when
// blocks are present).
func (m Message) BlockText() string { return strings.Join(blockTexts(m.Blocks), "\n") }

// Buttons lists the message's buttons.
func (m Message) Buttons() []Button {
	var out []Button
	var blocks []map[string]any
	_ = json.Unmarshal(m.Blocks, &blocks)
	for _, b := range blocks {
		if b["type"] != "actions" {
			continue
		}
		blockID, _ := b["block_id"].(string)
		els, _ := b["elements"].([]any)
		for _, e := range els {
			el, _ := e.(map[string]any)
			if el["type"] != "button" {
				continue
			}
			btn := Button{BlockID: blockID}
			btn.ActionID, _ = el["action_id"].(string)
			btn.Value, _ = el["value"].(string)
			if t, ok := el["text"].(map[string]any); ok {
				btn.Text, _ = t["text"].(string)
			}
			out = append(out, btn)
		}
	}
	return out
}

// blockTexts collects every "text" string in the blocks, depth first.
func blockTexts(raw json.RawMessage) []string {
	if len(raw) == 0 {
		return nil
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return nil
	}
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if t, ok := x["text"].(string); ok {
				out = append(out, t)
			}
			for _, k := range slices.Sorted(maps.Keys(x)) { // deterministic order
				if c := x[k]; k != "text" || !isString(c) {
					walk(c)
				}
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(v)
	return out
}

func isString(v any) bool { _, ok := v.(string); return ok }

// Messages returns the channel's messages (top level and replies) in the
// order they were posted.
func (s *Server) Messages(channel string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Message, 0, len(s.messages[channel]))
	for _, m := range s.messages[channel] {
		out = append(out, m.copy())
	}
	return out
}

// BotMessages returns the bot's messages in the channel, in posting order.
func (s *Server) BotMessages(channel string) []Message {
	var out []Message
	for _, m := range s.Messages(channel) {
		if m.FromBot() {
			out = append(out, m)
		}
	}
	return out
}

// TopLevel returns the channel's top-level messages in posting order.
func (s *Server) TopLevel(channel string) []Message {
	var out []Message
	for _, m := range s.Messages(channel) {
		if m.ThreadTS == "" {
			out = append(out, m)
		}
	}
	return out
}

// Thread returns the replies in the thread under root, in posting order.
func (s *Server) Thread(channel, root string) []Message {
	var out []Message
	for _, m := range s.Messages(channel) {
		if m.ThreadTS == root {
			out = append(out, m)
		}
	}
	return out
}

// Message returns one message.
func (s *Server) Message(channel, ts string) (Message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.findLocked(channel, ts); m != nil {
		return m.copy(), true
	}
	return Message{}, false
}

// Ephemerals returns the ephemeral messages shown to user in channel.
func (s *Server) Ephemerals(channel, user string) []Ephemeral {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Ephemeral
	for _, e := range s.eph {
		if e.Channel == channel && e.User == user {
			out = append(out, e)
		}
	}
	return out
}

func (s *Server) findLocked(channel, ts string) *Message {
	for _, m := range s.messages[channel] {
		if m.TS == ts {
			return m
		}
	}
	return nil
}

func (m *Message) copy() Message {
	c := *m
	c.Revisions = append([]Revision(nil), m.Revisions...)
	return c
}
