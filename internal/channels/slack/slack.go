// Package slack is the Slack channel: it connects over Socket Mode (no
// public URL needed), delivers slash commands, mentions, messages in the
// allowed channels and gate button clicks to the host, and posts run
// threads, status cards and gate prompts as Block Kit. Everything is
// denied unless the Policy allows it.
package slack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	slackgo "github.com/slack-go/slack"

	"nanohost/internal/channels"
)

// Config configures the Slack channel.
type Config struct {
	// BotToken is the bot user OAuth token (xoxb-…).
	BotToken string
	// AppToken is the app-level token with connections:write (xapp-…).
	AppToken string
	// Policy says who may do what; required.
	Policy Policy
	// APIURL overrides Slack's Web API base URL (tests: a slacktest server).
	APIURL string
	// Send tunes rate limiting and retries.
	Send SendConfig
	// PingTimeout is how long without a ping from Slack before the
	// connection is considered dead and reopened (default 30s).
	PingTimeout time.Duration
	Logger      *slog.Logger
}

// Channel is the Slack channel.
type Channel struct {
	cfg  Config
	api  *slackgo.Client
	auth *authorizer
	log  *slog.Logger

	life  context.Context
	close context.CancelFunc

	mu      sync.Mutex
	outbox  map[string]*outbox
	status  Status
	botUser string
	running bool

	seen  *lru
	names *nameCache
}

var _ channels.Channel = (*Channel)(nil)
var _ channels.GateAuthorizer = (*Channel)(nil)
var _ channels.UserNamer = (*Channel)(nil)
var _ channels.ConnStater = (*Channel)(nil)
var _ channels.ThreadEphemeral = (*Channel)(nil)

// New checks the configuration and returns the channel (not connected
// yet: call Run). Without a complete Policy it refuses, saying which
// setting to add.
func New(cfg Config) (*Channel, error) {
	var problems []string
	if !strings.HasPrefix(cfg.BotToken, "xoxb-") {
		problems = append(problems, "set slack.bot_token to the bot token (xoxb-…, from the app's OAuth & Permissions page)")
	}
	if !strings.HasPrefix(cfg.AppToken, "xapp-") {
		problems = append(problems, "set slack.app_token to an app-level token with connections:write (xapp-…, from Basic Information → App-Level Tokens)")
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("slack: %s", strings.Join(problems, "; "))
	}
	if err := cfg.Policy.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.PingTimeout <= 0 {
		cfg.PingTimeout = 30 * time.Second
	}
	cfg.Send = cfg.Send.withDefaults()
	opts := []slackgo.Option{slackgo.OptionAppLevelToken(cfg.AppToken)}
	if cfg.APIURL != "" {
		opts = append(opts, slackgo.OptionAPIURL(cfg.APIURL))
	}
	api := slackgo.New(cfg.BotToken, opts...)
	log := cfg.Logger.With("channel", "slack")
	life, cancel := context.WithCancel(context.Background())
	c := &Channel{
		cfg: cfg, api: api, log: log, life: life, close: cancel,
		outbox: make(map[string]*outbox),
		status: Status{State: StateDisconnected, Since: time.Now()},
		seen:   newLRU(4096),
	}
	c.auth = newAuthorizer(cfg.Policy, func(ctx context.Context, group string) ([]string, error) {
		return api.GetUserGroupMembersContext(ctx, group)
	}, log)
	c.names = newNameCache(func(ctx context.Context, user string) (string, error) {
		u, err := api.GetUserInfoContext(ctx, user)
		if err != nil {
			return "", err
		}
		return displayName(u), nil
	})
	return c, nil
}

// Close stops delivery; queued calls fail with an error.
func (c *Channel) Close() { c.close() }

// Name implements channels.Channel.
func (c *Channel) Name() string { return "slack" }

// Owns implements channels.Channel: Slack conversation ids.
func (c *Channel) Owns(chat string) bool { return channelIDPattern.MatchString(chat) }

// Post implements channels.Channel. Only the policy's channels are posted to.
func (c *Channel) Post(ctx context.Context, chat, thread string, m channels.Message) (string, error) {
	if err := c.checkChat(chat); err != nil {
		return "", err
	}
	ts, err := c.outboxFor(chat).do(ctx, &op{kind: opPost, chat: chat, thread: thread, msg: render(m)})
	if err != nil {
		return "", fmt.Errorf("slack: post in %s: %w", chat, err)
	}
	return ts, nil
}

// Update implements channels.Channel.
func (c *Channel) Update(ctx context.Context, chat, msgID string, m channels.Message) error {
	if err := c.checkChat(chat); err != nil {
		return err
	}
	if _, err := c.outboxFor(chat).do(ctx, &op{kind: opUpdate, chat: chat, ts: msgID, msg: render(m)}); err != nil {
		return fmt.Errorf("slack: edit %s in %s: %w", msgID, chat, err)
	}
	return nil
}

// Ephemeral implements channels.Channel.
func (c *Channel) Ephemeral(ctx context.Context, chat, user, text string) error {
	if _, err := c.outboxFor(chat).do(ctx, &op{kind: opEphemeral, chat: chat, user: user, msg: ephemeralMessage(text)}); err != nil {
		return fmt.Errorf("slack: ephemeral to %s in %s: %w", user, chat, err)
	}
	return nil
}

// EphemeralInThread implements channels.ThreadEphemeral.
func (c *Channel) EphemeralInThread(ctx context.Context, chat, thread, user, text string) error {
	call := &op{kind: opEphemeral, chat: chat, thread: thread, user: user, msg: ephemeralMessage(text)}
	if _, err := c.outboxFor(chat).do(ctx, call); err != nil {
		return fmt.Errorf("slack: ephemeral to %s in thread %s of %s: %w", user, thread, chat, err)
	}
	return nil
}

// AuthorizeGateAnswer implements channels.GateAuthorizer with the Policy.
func (c *Channel) AuthorizeGateAnswer(ctx context.Context, user string, g channels.GateRef) error {
	return c.auth.mayAnswer(ctx, user, g)
}

// AuthorizeRegister decides whether user may register a group from chat
// (/register in the main group's channel): only slack.policy.starters may.
// The error's text is shown to the user.
func (c *Channel) AuthorizeRegister(ctx context.Context, user, chat string) error {
	return c.auth.mayRegister(ctx, user, chat)
}

// UserName implements channels.UserNamer (users.info, cached).
func (c *Channel) UserName(ctx context.Context, user string) string { return c.names.get(ctx, user) }

func (c *Channel) checkChat(chat string) error {
	if !c.auth.chatAllowed(chat) {
		return fmt.Errorf("slack: will not post in %s: it is not in slack.policy.channels", chat)
	}
	return nil
}

func (c *Channel) outboxFor(chat string) *outbox {
	c.mu.Lock()
	defer c.mu.Unlock()
	o, ok := c.outbox[chat]
	if !ok {
		o = newOutbox(c.life, c.api, chat, c.cfg.Send, c.log)
		c.outbox[chat] = o
	}
	return o
}

// ConnState is the state of the Socket Mode connection.
type ConnState string

const (
	StateDisconnected ConnState = "disconnected"
	StateConnecting   ConnState = "connecting"
	StateConnected    ConnState = "connected"
	// StateInvalidAuth means Slack refused the tokens; Run has returned.
	StateInvalidAuth ConnState = "invalid_auth"
)

// Status is the connection's health, for health checks.
type Status struct {
	State ConnState
	Since time.Time
	// LastError is the last connection error, "" if none since connecting.
	LastError string
	// Connections counts the websocket connections opened so far.
	Connections int
}

// State returns the connection's health.
func (c *Channel) State() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status
}

// ConnState implements channels.ConnStater.
func (c *Channel) ConnState() string { return string(c.State().State) }

func (c *Channel) setState(s ConnState, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.status.State != s {
		c.status.State, c.status.Since = s, time.Now()
	}
	if s == StateConnected {
		c.status.Connections++
		c.status.LastError = ""
	}
	if err != nil {
		c.status.LastError = err.Error()
	}
}

// ErrAlreadyRunning is returned by a second concurrent Run.
var ErrAlreadyRunning = errors.New("slack: Run is already running")
