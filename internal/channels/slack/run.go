package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	slackgo "github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"

	"nanohost/internal/channels"
	"nanohost/internal/runlog"
)

// Run connects over Socket Mode and delivers inbound events until ctx ends.
// Every envelope is acknowledged as soon as it is read, before any work
// (Slack wants an ack within 3 s); the work happens on another goroutine,
// in order. Two connections are kept open (see pool), so one always takes
// what Slack sends while the other is replaced. Run returns only when ctx
// ends or Slack refuses a token (the error names the setting to fix).
func (c *Channel) Run(ctx context.Context, deliver func(channels.Inbound)) error {
	c.mu.Lock()
	if c.running {
		c.mu.Unlock()
		return ErrAlreadyRunning
	}
	c.running = true
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.running = false
		c.status.Open = 0
		if s := c.status.State; s != channels.InvalidAuth && s != channels.MissingScope { // refusals stay visible to health checks
			c.status.State, c.status.Since = channels.Disconnected, time.Now()
		}
		c.mu.Unlock()
	}()

	if err := c.identify(ctx); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	work := newWorkQueue(c.cfg.MaxWaiting)
	var wg sync.WaitGroup
	wg.Go(func() { c.work(ctx, work, deliver) })
	err := newPool(c, func(s *socket, req socketmode.Request, raw json.RawMessage) {
		c.onRequest(s, req, raw, work)
	}).run(ctx)
	cancel()
	wg.Wait()
	return err
}

// identify learns the bot's own user id (to ignore its own messages and
// strip its mention), retrying while Slack is unreachable, and checks the
// token's scopes against what the policy's channels need.
func (c *Channel) identify(ctx context.Context) error {
	backoff := c.cfg.Send.InitialBackoff
	for {
		resp, err := c.api.AuthTestContext(ctx)
		if err == nil {
			c.mu.Lock()
			c.botUser = resp.UserID
			c.mu.Unlock()
			c.checkScopes(resp.Header.Get("X-OAuth-Scopes"))
			return nil
		}
		kind, after := classify(ctx, err)
		switch {
		case kind == failCanceled:
			return nil
		case !kind.retryable():
			c.setState(channels.InvalidAuth, err)
			return fmt.Errorf("slack: auth.test with the bot token failed (%w): check slack.bot_token", err)
		}
		c.setState(channels.Connecting, err)
		if err := sleep(ctx, c.life, max(backoff, after)); err != nil {
			return nil
		}
		backoff = min(backoff*2, c.cfg.Send.MaxBackoff)
	}
}

// onRequest runs on a socket's reading goroutine: it acks envelopes at
// once and leaves the work to the worker.
func (c *Channel) onRequest(s *socket, req socketmode.Request, raw json.RawMessage, work *workQueue) {
	ev, err := parseRequest(req)
	if err != nil {
		// Unparseable, but still an envelope: ack it so Slack does not
		// retry it.
		if req.EnvelopeID != "" {
			_ = s.ack(req.EnvelopeID, nil)
		}
		c.log.Warn("slack: unreadable envelope", "type", req.Type, "err", err, "bytes", len(raw))
		return
	}
	if work.full() {
		c.log.Error("slack: the host is behind; an envelope is left unacknowledged for Slack to retry or report",
			"type", req.Type, "waiting", work.len())
		return
	}
	j := job{ev: ev}
	j.answered = c.ack(s, ev)
	j.chat, j.ts = slackTime(ev)
	work.push(j)
}

// parseRequest reads an envelope's payload into slack-go's types, as its
// socketmode client does.
func parseRequest(req socketmode.Request) (socketmode.Event, error) {
	ev := socketmode.Event{Type: socketmode.EventType(req.Type), Request: &req}
	var err error
	switch req.Type {
	case socketmode.RequestTypeEventsAPI:
		ev.Data, err = slackevents.ParseEvent(req.Payload, slackevents.OptionNoVerifyToken())
	case socketmode.RequestTypeSlashCommands:
		var cmd slackgo.SlashCommand
		err = json.Unmarshal(req.Payload, &cmd)
		ev.Data = cmd
	case socketmode.RequestTypeInteractive:
		var cb slackgo.InteractionCallback
		err = json.Unmarshal(req.Payload, &cb)
		ev.Data = cb
	default:
		err = fmt.Errorf("unknown socket mode message type %q", req.Type)
	}
	return ev, err
}

// ack acknowledges an envelope on the socket that carried it. A slash
// command whose answer needs no I/O (help, a parse error, a channel outside
// the policy) is answered in the ack itself: that reaches the user even in
// a channel the bot was never invited to, where chat.postEphemeral fails
// with not_in_channel. It reports whether the ack carried the answer.
func (c *Channel) ack(s *socket, ev socketmode.Event) (answered bool) {
	id := ev.Request.EnvelopeID
	if cmd, ok := ev.Data.(slackgo.SlashCommand); ok {
		if reply, _, done := c.slashReply(cmd); done {
			// An oversized payload is refused before sending; then a plain
			// ack goes out and the worker answers with chat.postEphemeral.
			if err := s.ack(id, commandResponse(reply)); err == nil {
				return true
			}
		}
	}
	if err := s.ack(id, nil); err != nil {
		c.log.Warn("slack: ack", "envelope", id, "socket", s.id, "err", err)
	}
	return false
}

// commandResponse is a slash command's ephemeral response, sent in its ack.
func commandResponse(text string) map[string]any {
	msg := ephemeralMessage(text)
	return map[string]any{"response_type": "ephemeral", "text": msg.text, "blocks": msg.blocks}
}

// job is an acknowledged envelope waiting for the worker; answered is set
// when its ack already answered the user.
type job struct {
	ev       socketmode.Event
	answered bool
	// chat and ts are where and when (Slack's clock) the person acted, for
	// a message or a click; "" for a slash command.
	chat, ts string
	arrived  time.Time
}

// work handles acknowledged envelopes one by one, in arrival order.
func (c *Channel) work(ctx context.Context, q *workQueue, deliver func(channels.Inbound)) {
	for {
		j, ok := q.pop(ctx)
		if !ok {
			return
		}
		in, ok := c.interpret(ctx, j)
		if ok {
			deliver(in)
		}
	}
}

// interpret turns an envelope into an inbound event for the host, or
// handles it here (duplicates, the bot's own messages, help, refusals).
func (c *Channel) interpret(ctx context.Context, j job) (channels.Inbound, bool) {
	ev := j.ev
	switch data := ev.Data.(type) {
	case slackevents.EventsAPIEvent:
		return c.fromEvent(ctx, data, envelopeID(ev))
	case slackgo.SlashCommand:
		return c.fromSlash(ctx, data, envelopeID(ev), j.answered)
	case slackgo.InteractionCallback:
		return c.fromInteraction(ctx, data, envelopeID(ev))
	}
	return channels.Inbound{}, false
}

func envelopeID(ev socketmode.Event) string {
	if ev.Request != nil {
		return ev.Request.EnvelopeID
	}
	return ""
}

// firstTime records a delivery key and reports whether it is new: Slack
// retries Events API deliveries (same event id) it thinks were lost, maybe
// to another replica's socket — so past this process's memory, the claim
// in the store decides (Config.Claim). A claim that cannot be recorded
// lets the envelope through: handled twice is better than lost.
func (c *Channel) firstTime(ctx context.Context, key string) bool {
	if key == "" {
		return true
	}
	if !c.seen.add(key) {
		return false
	}
	if c.cfg.Claim == nil {
		return true
	}
	first, err := c.cfg.Claim(ctx, "slack:"+key)
	if err != nil {
		c.log.Warn("slack: could not claim an envelope in the store; handling it (another replica may too)", "key", key, "err", err)
		return true
	}
	if !first {
		c.log.Info("slack: envelope handled by another replica", "key", key)
	}
	return first
}

func (c *Channel) fromEvent(ctx context.Context, ev slackevents.EventsAPIEvent, envID string) (channels.Inbound, bool) {
	eventID := envID
	if cb, ok := ev.Data.(*slackevents.EventsAPICallbackEvent); ok && cb.EventID != "" {
		eventID = cb.EventID
	}
	if !c.firstTime(ctx, "event:"+eventID) {
		c.log.Debug("slack: duplicate event ignored", "event", eventID)
		return channels.Inbound{}, false
	}
	bot := c.botUserID()
	switch e := ev.InnerEvent.Data.(type) {
	case *slackevents.AppMentionEvent:
		if e.BotID != "" || e.User == "" || e.User == bot || !c.auth.chatAllowed(e.Channel) {
			return channels.Inbound{}, false
		}
		return channels.Inbound{Kind: channels.KindMention, Channel: c.Name(), Chat: e.Channel, Thread: e.ThreadTimeStamp,
			User: e.User, Text: strings.TrimSpace(strings.ReplaceAll(e.Text, "<@"+bot+">", "")), MsgID: e.TimeStamp,
			EventID: eventID, At: time.Now()}, true
	case *slackevents.MessageEvent:
		// Edits, joins and bot posts (ours included) are not people talking;
		// a thread reply also sent to the channel is.
		if (e.SubType != "" && e.SubType != "thread_broadcast") || e.BotID != "" || e.User == "" || e.User == bot || !c.auth.chatAllowed(e.Channel) {
			return channels.Inbound{}, false
		}
		if bot != "" && strings.Contains(e.Text, "<@"+bot+">") {
			return channels.Inbound{}, false // its app_mention event delivers it
		}
		return channels.Inbound{Kind: channels.KindMessage, Channel: c.Name(), Chat: e.Channel, Thread: e.ThreadTimeStamp,
			User: e.User, Text: e.Text, MsgID: e.TimeStamp, EventID: eventID, At: time.Now()}, true
	}
	return channels.Inbound{}, false
}

func (c *Channel) fromSlash(ctx context.Context, cmd slackgo.SlashCommand, envID string, answered bool) (channels.Inbound, bool) {
	if !c.firstTime(ctx, "trigger:"+firstNonEmpty(cmd.TriggerID, envID)) {
		return channels.Inbound{}, false
	}
	reply, parsed, done := c.slashReply(cmd)
	if done {
		if !c.auth.chatAllowed(cmd.ChannelID) {
			c.auth.logDecision("command", errors.New("channel not in slack.policy.channels"), "user", cmd.UserID, "chat", cmd.ChannelID)
		} else {
			c.log.Info("slack: /pipeline answered by the channel", "user", cmd.UserID, "chat", cmd.ChannelID, "reply", firstLine(reply))
		}
		if !answered {
			c.reply(ctx, cmd.ChannelID, cmd.UserID, reply)
		}
		return channels.Inbound{}, false
	}
	if parsed.Changes() {
		if err := c.auth.mayChange(ctx, cmd.UserID, cmd.ChannelID, parsed); err != nil {
			c.reply(ctx, cmd.ChannelID, cmd.UserID, "✋ "+err.Error())
			return channels.Inbound{}, false
		}
	}
	return channels.Inbound{Kind: channels.KindCommand, Channel: c.Name(), Chat: cmd.ChannelID, User: cmd.UserID,
		Text: cmd.Text, Command: &parsed, EventID: firstNonEmpty(cmd.TriggerID, envID), At: time.Now()}, true
}

func (c *Channel) fromInteraction(ctx context.Context, cb slackgo.InteractionCallback, envID string) (channels.Inbound, bool) {
	if cb.Type != slackgo.InteractionTypeBlockActions || !c.firstTime(ctx, "trigger:"+firstNonEmpty(cb.TriggerID, envID)) {
		return channels.Inbound{}, false
	}
	for _, a := range cb.ActionCallback.BlockActions {
		answer, ok := decodeGateAction(a.ActionID, a.Value, c.gateOf)
		if !ok {
			c.log.Info("slack: ignored a click on a button that is not a gate button", "action_id", a.ActionID, "user", cb.User.ID)
			continue
		}
		chat := firstNonEmpty(cb.Container.ChannelID, cb.Channel.ID)
		thread := firstNonEmpty(cb.Container.ThreadTs, cb.Message.ThreadTimestamp)
		return channels.Inbound{Kind: channels.KindGateAnswer, Channel: c.Name(), Chat: chat, Thread: thread,
			User: cb.User.ID, Gate: &answer, MsgID: firstNonEmpty(cb.Container.MessageTs, cb.Message.Timestamp),
			EventID: firstNonEmpty(cb.TriggerID, envID), At: time.Now()}, true
	}
	return channels.Inbound{}, false
}

// slashReply decides, without any I/O, the slash commands the channel
// answers itself: outside the policy's channels (a refusal that says which
// setting to add), help, and text that does not parse. done is false when
// the command goes on (authorization, then the host).
func (c *Channel) slashReply(cmd slackgo.SlashCommand) (reply string, parsed channels.Command, done bool) {
	if !c.auth.chatAllowed(cmd.ChannelID) {
		return runlog.NotEnabledHere(cmd.ChannelID), parsed, true
	}
	text, help := cmd.Text, runlog.PipelineHelp
	if cmd.Command == "/schedule" {
		text, help = "/schedule "+cmd.Text, runlog.ScheduleHelp
	}
	parsed, err := channels.ParseAny(text)
	switch {
	case err != nil:
		return runlog.Refused(fmt.Sprintf("%v\n\n%s", err, help)), parsed, true
	case parsed.Kind == channels.CmdHelp, parsed.Schedule != nil && parsed.Schedule.Action == "help":
		return help, parsed, true
	}
	return "", parsed, false
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// reply sends an ephemeral answer, logging (not failing) when it cannot.
func (c *Channel) reply(ctx context.Context, chat, user, text string) {
	if err := c.Ephemeral(ctx, chat, "", user, text); err != nil {
		c.log.Warn("slack: ephemeral reply", "user", user, "chat", chat, "err", err)
	}
}

func (c *Channel) botUserID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.botUser
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
