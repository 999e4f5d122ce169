// Package console is a terminal chat channel for local use: it reads lines
// from an io.Reader and prints run threads, status cards and gate prompts to
// an io.Writer. Gates are answered by typing a choice's key (or free text at
// a freeform gate); "/pipeline …" lines are commands, as in Slack.
package console

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"nanohost/internal/channels"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runlog"
	"nanohost/internal/runs"
)

// Chat is the console's only chat id.
const Chat = "console"

// User is the person at the console.
const User = "console"

// maxDetail bounds agent text printed at the console; the full text is in
// the run's logs.
const maxDetail = 4000

// Console is the terminal channel.
type Console struct {
	in  io.Reader
	out io.Writer

	// session and typed number the lines typed at the console (see
	// messageID).
	session string
	typed   int

	mu     sync.Mutex
	nextID int
	// gates are the prompts posted and not settled yet, oldest first; a
	// typed key answers the newest.
	gates []prompt
	// cards remembers what each status card last showed, so an edit that
	// only moves the clock prints nothing.
	cards map[string]string
}

type prompt struct {
	msgID string
	gate  runs.Gate
}

// New returns a console reading in and writing out.
func New(in io.Reader, out io.Writer) *Console {
	return &Console{
		in: in, out: out, cards: make(map[string]string),
		session: strconv.FormatInt(time.Now().UnixNano(), 36),
	}
}

// messageID names a typed message: the console's start time and the line's
// number, unique across restarts. With an id the host stores the message
// before answering it, and answers it after a crash if it had not yet.
func (c *Console) messageID() string {
	c.typed++ // only Run's goroutine types
	return fmt.Sprintf("in-%s-%d", c.session, c.typed)
}

// Name implements channels.Channel.
func (c *Console) Name() string { return "console" }

// Owns implements channels.Channel.
func (c *Console) Owns(chat string) bool { return chat == Chat }

// Run reads lines until ctx ends or the input ends (then it returns nil).
func (c *Console) Run(ctx context.Context, deliver func(channels.Inbound)) error {
	lines := make(chan string)
	readErr := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(c.in)
		sc.Buffer(make([]byte, 64*1024), 1<<20) // a pasted pipeline can be long
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
		readErr <- sc.Err()
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-readErr:
			if err != nil {
				return fmt.Errorf("console: read input: %w", err)
			}
			return nil
		case line := <-lines:
			if in, ok := c.interpret(line); ok {
				deliver(in)
			}
		}
	}
}

// interpret turns a typed line into an inbound event, answering help and
// command errors itself.
func (c *Console) interpret(line string) (channels.Inbound, bool) {
	text := strings.TrimSpace(line)
	if text == "" {
		return channels.Inbound{}, false
	}
	base := channels.Inbound{Channel: c.Name(), Chat: Chat, User: User, Text: text}
	if strings.HasPrefix(text, "/pipeline") {
		cmd, err := channels.ParseCommand(text)
		switch {
		case err != nil:
			c.printf("✗ %v\n%s\n", err, channels.HelpText)
			return channels.Inbound{}, false
		case cmd.Kind == channels.CmdHelp:
			c.printf("%s\n", channels.HelpText)
			return channels.Inbound{}, false
		}
		base.Kind, base.Command = channels.KindCommand, &cmd
		return base, true
	}
	if p, ok := c.newestGate(); ok {
		if answer, ok := gateAnswer(p.gate, text); ok {
			base.Kind, base.Gate, base.MsgID = channels.KindGateAnswer, &answer, p.msgID
			return base, true
		}
		if p.gate.Question().KeyShared(text) {
			c.printf("(%s is the key of more than one choice: type the choice's name)\n", text)
			return channels.Inbound{}, false
		}
		c.printf("(type one of the keys above%s)\n", map[bool]string{true: ", or text to answer with it", false: ""}[p.gate.Question().AcceptsText()])
		return channels.Inbound{}, false
	}
	base.Kind, base.MsgID = channels.KindMessage, c.messageID()
	return base, true
}

// gateAnswer matches a typed line to a choice (its key, unless two
// choices share it, or its name), or takes it as free text when the gate
// accepts text.
func gateAnswer(g runs.Gate, text string) (runs.GateAnswer, bool) {
	a := runs.GateAnswer{RunID: g.RunID, GateID: g.GateID, Nonce: g.Nonce}
	q := g.Question()
	if q.KeyShared(text) {
		return a, false // the caller says to type the name instead
	}
	if i, ok := engine.OptionIndex(q.Options, text); ok && !q.Options[i].Freeform {
		a.Option = i + 1
		return a, true
	}
	if q.AcceptsText() {
		a.Text = text
		return a, true
	}
	return a, false
}

func (c *Console) newestGate() (prompt, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.gates) == 0 {
		return prompt{}, false
	}
	return c.gates[len(c.gates)-1], true
}

// Post implements channels.Channel.
func (c *Console) Post(_ context.Context, chat, thread string, m channels.Message) (string, error) {
	if !c.Owns(chat) {
		return "", fmt.Errorf("console: chat %q is not the console (%q)", chat, Chat)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextID++
	id := fmt.Sprintf("c%d", c.nextID)
	indent := ""
	if ownMessage(thread) {
		indent = "  " // a run's story, under its status card
	}
	switch {
	case m.Card != nil:
		c.cards[id] = cardKey(*m.Card)
		c.writeLocked(indent, m.Card.Text())
	case m.Gate != nil:
		c.gates = append(c.gates, prompt{msgID: id, gate: *m.Gate})
		c.writeLocked(indent, runlog.PromptText(m.Gate.Question())+channels.LinksText(m.Links))
	case m.Resolved != nil:
		c.writeLocked(indent, m.Resolved.Text())
	default:
		c.writeLocked(indent, m.Text)
		if m.Detail != "" {
			c.writeLocked(indent+"  │ ", truncate(m.Detail, m.LogRef))
		}
	}
	return id, nil
}

// Update implements channels.Channel: a settled gate is printed with who
// chose what; a status card is printed again when it says something new.
func (c *Console) Update(_ context.Context, chat, msgID string, m channels.Message) error {
	if !c.Owns(chat) {
		return fmt.Errorf("console: chat %q is not the console (%q)", chat, Chat)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case m.Card != nil:
		key := cardKey(*m.Card)
		if c.cards[msgID] == key {
			return nil
		}
		c.cards[msgID] = key
		c.writeLocked("", m.Card.Text())
	case m.Resolved != nil:
		c.gates = removePrompt(c.gates, msgID)
		res := *m.Resolved
		if res.By == User {
			res.By = "you" // the person reading this typed the answer
		}
		c.writeLocked("  ", res.Text())
	default:
		c.writeLocked("  ", "(edited) "+m.Text)
	}
	return nil
}

// Ephemeral implements channels.Channel: the console is one person's
// terminal, so a reply to them is just printed.
func (c *Console) Ephemeral(_ context.Context, chat, _, _ string, text string) error {
	if !c.Owns(chat) {
		return fmt.Errorf("console: chat %q is not the console (%q)", chat, Chat)
	}
	c.printf("%s\n", text)
	return nil
}

// Capabilities implements channels.Channel: the person at the console is
// "you"; anyone else (a dashboard user, an agent) goes by their id.
func (c *Console) Capabilities() channels.Capabilities {
	return channels.Capabilities{UserName: func(_ context.Context, user string) string {
		if user == User {
			return "you"
		}
		return user
	}}
}

// Policy is the console's runs.Policy: whoever sits at the host's own
// terminal runs it, and may do anything there.
func Policy() runs.Policy { return runs.LocalOperator{User: User} }

// Notice prints a line from the host itself (not part of any chat), such
// as where the dashboard is once the host is ready.
func (c *Console) Notice(text string) { c.printf("%s\n", text) }

func (c *Console) printf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fmt.Fprintf(c.out, format, args...)
}

func (c *Console) writeLocked(indent, text string) {
	for line := range strings.SplitSeq(strings.TrimRight(text, "\n"), "\n") {
		fmt.Fprintf(c.out, "%s%s\n", indent, line)
	}
}

// ownMessage reports whether id is a message the console printed (c<n>),
// not a line typed at it: replies to what the person typed are printed flush
// left, like the conversation they are.
func ownMessage(id string) bool {
	_, err := strconv.Atoi(strings.TrimPrefix(id, "c"))
	return strings.HasPrefix(id, "c") && err == nil
}

// cardKey is what makes a card edit worth printing: state and stage, not the clock.
func cardKey(card runlog.Card) string {
	return fmt.Sprintf("%s|%s|%d|%s", card.State, card.Current, card.Index, card.LastOutcome)
}

func removePrompt(ps []prompt, msgID string) []prompt {
	out := ps[:0]
	for _, p := range ps {
		if p.msgID != msgID {
			out = append(out, p)
		}
	}
	return out
}

func truncate(s, logRef string) string {
	if len(s) <= maxDetail {
		return s
	}
	where := "the run's logs"
	if logRef != "" {
		where = logRef
	}
	cut := maxDetail
	for cut > 0 && !utf8RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "\n… (truncated; the full text is in " + where + ")"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
