package main

import (
	"log/slog"

	"nanohost/internal/channels"
	"nanohost/internal/channels/slack"
	"nanohost/internal/config"
)

// newSlackChannel builds the Slack adapter from the configuration.
func newSlackChannel(cfg *config.Config) (channels.Channel, error) {
	p := cfg.Slack.Policy
	return slack.New(slack.Config{
		BotToken: cfg.Slack.BotToken.Reveal(),
		AppToken: cfg.Slack.AppToken.Reveal(),
		APIURL:   cfg.Slack.APIURL,
		Policy: slack.Policy{
			Channels: p.Channels, Starters: p.Starters, Approvers: p.Approvers, PreventSelfApproval: p.PreventSelfApproval,
		},
		Logger: slog.Default().With("component", "slack"),
	})
}
