// Package slack is the Slack channel: it connects over Socket Mode (no
// public URL needed), delivers slash commands, mentions, messages in the
// allowed channels and gate button clicks to the host, and posts run
// threads, status cards and gate prompts as Block Kit. Everything is
// denied unless the Policy allows it.
package slack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	slackgo "github.com/slack-go/slack"

	"nanohost/internal/channels"
	"nanohost/internal/runs"
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
	// MaxWaiting bounds the envelopes acknowledged and waiting for the
	// host (default DefaultMaxWaiting). Past it an envelope is left
	// unacknowledged: Slack retries an event later and tells the person a
	// command or click failed — rather than nanohost taking it and
	// dropping it, or growing without bound while the host is stuck.
	MaxWaiting int
	// Claim, when set, claims an inbound envelope once among the host
	// replicas sharing a store (key: its event id or trigger id): Slack
	// may deliver an event again, to any replica's socket, and only the
	// replica whose claim is first handles it. false: handled elsewhere.
	Claim  func(ctx context.Context, key string) (first bool, err error)
	Logger *slog.Logger
}

// DefaultMaxWaiting is Config.MaxWaiting's default.
const DefaultMaxWaiting = 4096

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
	// rates paces each Web API method across the workspace.
	rates *methodRates
	// unsure holds the keys of posts whose answer was lost: they may have
	// landed, and are looked for before they are sent again.
	unsure *lru
	// instance and posts make keys for posts that report nothing of a run.
	instance string
	posts    atomic.Int64
	prompts  promptMemory
}

var _ channels.Channel = (*Channel)(nil)
var _ runs.Policy = (*authorizer)(nil)

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
	httpClient := &http.Client{Timeout: cfg.Send.CallTimeout}
	opts := []slackgo.Option{slackgo.OptionAppLevelToken(cfg.AppToken), slackgo.OptionHTTPClient(httpClient)}
	if cfg.APIURL != "" {
		opts = append(opts, slackgo.OptionAPIURL(cfg.APIURL))
	}
	api := slackgo.New(cfg.BotToken, opts...)
	// Lookups (who is in a user group, a user's name) change nothing, so
	// slack-go's own retries can take care of rate limits, 5xx and
	// dropped connections; posts are retried by the outbox, which must
	// first find out whether a failed one landed.
	reads := slackgo.New(cfg.BotToken, append(opts, slackgo.OptionRetryConfig(readRetries(cfg.Send)))...)
	log := cfg.Logger.With("channel", "slack")
	life, cancel := context.WithCancel(context.Background())
	c := &Channel{
		cfg: cfg, api: api, log: log, life: life, close: cancel,
		outbox:   make(map[string]*outbox),
		status:   Status{State: channels.Disconnected, Since: time.Now()},
		seen:     newLRU(4096),
		rates:    newMethodRates(cfg.Send.MethodRates),
		unsure:   newLRU(4096),
		instance: newInstanceID(),
	}
	c.auth = newAuthorizer(cfg.Policy, func(ctx context.Context, group string) ([]string, error) {
		if err := c.rates.wait(ctx, life, "usergroups.users.list"); err != nil {
			return nil, err
		}
		return reads.GetUserGroupMembersContext(ctx, group)
	}, log)
	c.names = newNameCache(func(ctx context.Context, user string) (string, error) {
		if err := c.rates.wait(ctx, life, "users.info"); err != nil {
			return "", err
		}
		u, err := reads.GetUserInfoContext(ctx, user)
		if err != nil {
			return "", err
		}
		return displayName(u), nil
	})
	return c, nil
}

// readRetries is slack-go's retry policy for lookups: 429s (Retry-After,
// or a second when Slack leaves it out), 5xx and connection errors.
func readRetries(send SendConfig) slackgo.RetryConfig {
	cfg := slackgo.RetryConfig{MaxRetries: 3, RetryAfterDuration: time.Second,
		BackoffInitial: send.InitialBackoff, BackoffMax: send.MaxBackoff}
	cfg.Handlers = append(slackgo.AllBuiltinRetryHandlers(cfg), slackgo.NewServerErrorRetryHandler(cfg))
	return cfg
}

// newInstanceID names this process's posts (see postLabel).
func newInstanceID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
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
	if m.Gate != nil {
		ts, err := c.postPrompt(ctx, chat, thread, m)
		if err != nil {
			return "", fmt.Errorf("slack: post gate prompt in %s: %w", chat, err)
		}
		return ts, nil
	}
	label := c.postLabel(m)
	if m.MayHaveLanded {
		c.unsure.add(labelKey(label)) // looked for before it is posted
	}
	ts, err := c.outboxFor(chat).do(ctx, &op{kind: opPost, chat: chat, thread: thread, msg: render(m), label: label})
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
	if m.Resolved != nil {
		c.settleFollowUps(ctx, chat, msgID)
	}
	return nil
}

// Ephemeral implements channels.Channel: shown to user alone, inside
// thread when there is one (chat.postEphemeral with thread_ts).
func (c *Channel) Ephemeral(ctx context.Context, chat, thread, user, text string) error {
	call := &op{kind: opEphemeral, chat: chat, thread: thread, user: user, msg: ephemeralMessage(text)}
	if _, err := c.outboxFor(chat).do(ctx, call); err != nil {
		return fmt.Errorf("slack: ephemeral to %s in %s: %w", user, chat, err)
	}
	return nil
}

// Capabilities implements channels.Channel: names from users.info (cached)
// and the Socket Mode connection's state.
func (c *Channel) Capabilities() channels.Capabilities {
	return channels.Capabilities{
		UserName:   c.names.get,
		Connection: c.connection,
	}
}

// Policy is what slack.policy allows, as the runs service asks it
// (runs.Policy): who may start, cancel and resume runs, and who may answer
// which gate, in which channels.
func (c *Channel) Policy() runs.Policy { return c.auth }

// MayRegister decides whether user may register a group from chat
// (/register in the main group's channel): only slack.policy.starters may.
// The error's text is shown to the user.
func (c *Channel) MayRegister(ctx context.Context, user, chat string) error {
	return c.auth.MayRegister(ctx, user, chat)
}

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
		o = newOutbox(c, chat)
		c.outbox[chat] = o
	}
	return o
}

// Status is the connection's health, for health checks.
type Status struct {
	State channels.Connection
	Since time.Time
	// LastError is the last connection error, "" if none since connecting.
	LastError string
	// Connections counts the websocket connections Slack said hello on so far.
	Connections int
	// Open is how many websocket connections are up now.
	Open int
	// MissingScopes are the bot token's missing scopes seen so far, each
	// with what it is needed for.
	MissingScopes map[string]string
}

// State returns the connection's health.
func (c *Channel) State() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.status
	s.MissingScopes = maps.Clone(c.status.MissingScopes)
	return s
}

// connection is the socket's state, or missing_scope while connected with
// a bot token that lacks a scope (Capabilities.Connection).
func (c *Channel) connection() channels.Connection {
	s := c.State()
	if s.State == channels.Connected && len(s.MissingScopes) > 0 {
		return channels.MissingScope
	}
	return s.State
}

func (c *Channel) setState(s channels.Connection, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.status.State != s {
		c.status.State, c.status.Since = s, time.Now()
	}
	if s == channels.Connected {
		c.status.LastError = ""
	}
	if err != nil {
		c.status.LastError = err.Error()
	}
}

// socketUp counts a connection Slack said hello on.
func (c *Channel) socketUp() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.status.Connections++
}

func (c *Channel) setSockets(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.status.Open = n
}

// scopeMissing records (and logs, once) that the bot token lacks scope,
// needed for what.
func (c *Channel) scopeMissing(scope, what string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.status.MissingScopes == nil {
		c.status.MissingScopes = make(map[string]string)
	}
	if _, known := c.status.MissingScopes[scope]; !known {
		c.log.Error("slack: the bot token lacks a scope: add it under OAuth & Permissions (docs/slack-app-manifest.yaml lists every scope and event nanohost uses) and reinstall the app",
			"scope", scope, "needed_for", what)
	}
	c.status.MissingScopes[scope] = what
}

// scopeFound forgets a missing scope once a call needing it worked.
func (c *Channel) scopeFound(scope string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.status.MissingScopes, scope)
}

// ErrAlreadyRunning is returned by a second concurrent Run.
var ErrAlreadyRunning = errors.New("slack: Run is already running")
