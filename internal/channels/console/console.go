// Package console is a terminal chat channel for local use: it reads lines
// from an io.Reader and prints run threads, status cards and gate prompts to
// an io.Writer. "/pipeline …" lines are commands, as in Slack (a pipeline
// pasted over several lines is read to its end first); other lines are
// messages, which the host takes as the answer to the one waiting gate when
// they name one of its choices (Capabilities.TypedAnswers). Each line of a
// run's story is marked with the run's short id, so runs going at once can
// be told apart.
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

// maxPaste bounds a pipeline pasted over several lines.
const maxPaste = 1 << 20

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
	// cards remembers what each status card last showed, so an edit that
	// only moves the clock prints nothing.
	cards map[string]string
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
	var paste []string // a pipeline being pasted, line by line
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
			text, ok := c.gather(&paste, line)
			if !ok {
				continue
			}
			if in, ok := c.interpret(text); ok {
				deliver(in)
			}
		}
	}
}

// gather collects a /pipeline command whose pipeline is pasted over
// several lines: ok once the text is whole (its closing brace or fence
// came), or at once for any other line.
func (c *Console) gather(paste *[]string, line string) (text string, ok bool) {
	if *paste == nil {
		if !channels.PasteOpen(line) {
			return line, true
		}
		*paste = []string{line}
		c.printf("… reading the pipeline to its closing } or ``` (a line with only . abandons it)\n")
		return "", false
	}
	if strings.TrimSpace(line) == "." {
		*paste = nil
		c.printf("(the pasted pipeline was abandoned)\n")
		return "", false
	}
	*paste = append(*paste, line)
	text = strings.Join(*paste, "\n")
	if len(text) > maxPaste {
		*paste = nil
		c.printf(runlog.MarkRefused+" the pasted pipeline is over %d KiB and was dropped: store it as a file in the group's workspace and use /pipeline run <name>\n", maxPaste>>10)
		return "", false
	}
	if channels.PasteOpen(text) {
		return "", false
	}
	*paste = nil
	return text, true
}

// interpret turns a typed line into an inbound event, answering help and
// command errors itself.
func (c *Console) interpret(line string) (channels.Inbound, bool) {
	text := strings.TrimSpace(line)
	if text == "" {
		return channels.Inbound{}, false
	}
	base := channels.Inbound{Channel: c.Name(), Chat: Chat, User: User, Text: text}
	if strings.HasPrefix(text, "/pipeline") || strings.HasPrefix(text, "/schedule") {
		cmd, err := channels.ParseAny(text)
		help := runlog.PipelineHelp
		if strings.HasPrefix(text, "/schedule") {
			help = runlog.ScheduleHelp
		}
		switch {
		case err != nil:
			c.printf("%s\n%s\n", runlog.Refused(err.Error()), help)
			return channels.Inbound{}, false
		case cmd.Kind == channels.CmdHelp, cmd.Schedule != nil && cmd.Schedule.Action == "help":
			c.printf("%s\n", help)
			return channels.Inbound{}, false
		}
		base.Kind, base.Command = channels.KindCommand, &cmd
		return base, true
	}
	base.Kind, base.MsgID = channels.KindMessage, c.messageID()
	return base, true
}

// Post implements channels.Channel.
func (c *Console) Post(_ context.Context, chat, thread string, m channels.Message) (string, error) {
	if !c.Owns(chat) {
		return "", fmt.Errorf("console: chat %q is not the console (%q)", chat, Chat)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextID++
	run := runOfMessage(thread)
	if m.Card != nil {
		run = runs.ShortID(m.Card.RunID)
	}
	id := postID(c.session, c.nextID, run)
	indent := ""
	if ownMessage(thread) {
		indent = "  " // a run's story, under its status card
		if run != "" {
			indent += run + " "
		}
	}
	switch {
	case m.Card != nil:
		c.cards[id] = cardKey(*m.Card)
		c.writeLocked(indent, m.Card.Text()+channels.LinksText(m.Links))
	case m.Gate != nil:
		c.writeLocked(indent, runlog.PromptWithHint(m.Gate.RunID, m.Gate.Question(), true)+channels.LinksText(m.Links))
	case m.Resolved != nil:
		c.writeLocked(indent, m.Resolved.Text())
	case m.AnswerTo != "":
		// The agent's reply to what the person typed.
		c.writeLocked(indent, runlog.AgentReply(m.Text)+channels.LinksText(m.Links))
	default:
		c.writeLocked(indent, m.Text+channels.LinksText(m.Links))
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
		res := *m.Resolved
		if res.By == User {
			res.By = "you" // the person reading this typed the answer
		}
		c.writeLocked(c.threadIndent(msgID), res.Text())
	default:
		c.writeLocked(c.threadIndent(msgID), "(edited) "+m.Text)
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

// threadIndent is how a line about message msgID of a run's thread is
// printed: indented, with the run's short id.
func (c *Console) threadIndent(msgID string) string {
	if run := runOfMessage(msgID); run != "" {
		return "  " + run + " "
	}
	return "  "
}

// Capabilities implements channels.Channel: the person at the console is
// "you"; anyone else (a dashboard user, an agent) goes by their id. The
// console is one person's terminal, so a typed key answers the one waiting
// question.
func (c *Console) Capabilities() channels.Capabilities {
	return channels.Capabilities{UserName: func(_ context.Context, user string) string {
		if user == User {
			return "you"
		}
		return user
	}, TypedAnswers: true}
}

// Policy is the console's runs.Policy: whoever sits at the host's own
// terminal runs it, and may do anything there.
func Policy() runs.Policy { return runs.LocalOperator{User: User} }

// Notice prints a line from the host itself (not part of any chat), such
// as where the dashboard is once the host is ready.
func (c *Console) Notice(text string) { c.printf("%s\n", text) }

// printf and writeLocked are the console's only ways out: what they print
// is escaped (runlog.Visible), so an agent's or a user's text cannot
// retitle, clear or recolour the operator's terminal.
func (c *Console) printf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	io.WriteString(c.out, runlog.Visible(fmt.Sprintf(format, args...)))
}

func (c *Console) writeLocked(indent, text string) {
	for line := range strings.SplitSeq(strings.TrimRight(text, "\n"), "\n") {
		fmt.Fprintf(c.out, "%s%s\n", indent, runlog.Visible(line))
	}
}

// postID names a message the console printed: c<session>.<n>, and
// .<run> for a message of a run's thread. The run is in the id itself, not
// in this process's memory: a thread is kept across restarts (its root id
// is stored), so a resumed run's lines carry its short id as a new run's
// do, and the session keeps ids of different processes apart.
func postID(session string, n int, run string) string {
	id := fmt.Sprintf("c%s.%d", session, n)
	if run != "" {
		id += "." + run
	}
	return id
}

// ownMessage reports whether id is a message the console printed, not a
// line typed at it: replies to what the person typed are printed flush
// left, like the conversation they are. (Versions before postID named
// them c<n>.)
func ownMessage(id string) bool {
	parts := strings.Split(strings.TrimPrefix(id, "c"), ".")
	if !strings.HasPrefix(id, "c") || len(parts) > 3 {
		return false
	}
	_, err := strconv.Atoi(parts[min(1, len(parts)-1)])
	return err == nil
}

// runOfMessage is the short id of the run whose thread message id is in
// ("" for any other message).
func runOfMessage(id string) string {
	if !ownMessage(id) {
		return ""
	}
	if parts := strings.Split(id, "."); len(parts) == 3 {
		return parts[2]
	}
	return ""
}

// cardKey is what makes a card edit worth printing: state and stage, not the clock.
func cardKey(card runlog.Card) string {
	return fmt.Sprintf("%s|%s|%d|%s", card.State, card.Current, card.Index, card.LastOutcome)
}

func truncate(s, logRef string) string {
	if len(s) <= maxDetail {
		return s
	}
	where := runlog.TheRunsLogs
	if logRef != "" {
		where = logRef
	}
	cut := maxDetail
	for cut > 0 && !utf8RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + runlog.TruncatedNote(where)
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
