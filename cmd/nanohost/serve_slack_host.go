package main

import (
	"log/slog"

	"nanohost/internal/channels"
	"nanohost/internal/channels/slack"
	"nanohost/internal/config"
)

// slackChannel is the Slack adapter as the host sees it: it also reports
// whether its Socket Mode connection is up (host.ConnectionReporter), for
// /healthz and nanohost_channel_connected.
type slackChannel struct{ *slack.Channel }

func (c slackChannel) Connected() bool { return c.State().State == slack.StateConnected }

// newSlackChannel builds the Slack adapter from the configuration.
func newSlackChannel(cfg *config.Config) (channels.Channel, error) {
	p := cfg.Slack.Policy
	ch, err := slack.New(slack.Config{
		BotToken: cfg.Slack.BotToken.Reveal(),
		AppToken: cfg.Slack.AppToken.Reveal(),
		APIURL:   cfg.Slack.APIURL,
		Policy: slack.Policy{
			Channels: p.Channels, Starters: p.Starters, Approvers: p.Approvers, PreventSelfApproval: p.PreventSelfApproval,
		},
		Logger: slog.Default().With("component", "slack"),
	})
	if err != nil {
		return nil, err
	}
	return slackChannel{ch}, nil
}
