package main

import (
	"context"
	"log/slog"

	"nanohost/internal/channels/slack"
	"nanohost/internal/config"
	"nanohost/internal/host"
)

// slackEndpoint builds the Slack adapter from the configuration, with what
// slack.policy allows people there.
func slackEndpoint(cfg *config.Config) (host.Endpoint, func(), error) {
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
		return host.Endpoint{}, nil, err
	}
	return host.Endpoint{Channel: ch, Policy: ch.Policy(), MayRegister: ch.MayRegister}, ch.Close, nil
}

// consoleMayRegister: the console is the local operator's own terminal.
func consoleMayRegister(context.Context, string, string) error { return nil }
