package main

import (
	"errors"

	"nanohost/internal/channels"
	"nanohost/internal/config"
)

// newSlackChannel connects the Slack adapter. It is wired here, apart from
// serve.go, because the adapter lands separately.
func newSlackChannel(cfg *config.Config) (channels.Channel, error) {
	return nil, errors.New("this build has no Slack adapter yet: unset SLACK_BOT_TOKEN/SLACK_APP_TOKEN to use the console")
}
