package slacktest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// App is the Slack app as installed in the workspace: what its bot token
// may do and which events Slack sends it. Slack checks every Web API call
// against the scopes (missing_scope) and silently sends no event the app
// is not subscribed to, so a manifest that lacks a scope shows up in tests
// as it would in a real workspace.
type App struct {
	// BotScopes are the bot token's OAuth scopes.
	BotScopes []string
	// BotEvents are the bot event subscriptions (message.channels, …).
	BotEvents []string
	// Interactivity delivers button clicks (block_actions).
	Interactivity bool
	// SlashCommands are the app's commands ("/pipeline").
	SlashCommands []string
	// SocketMode must be on for apps.connections.open.
	SocketMode bool
}

// manifest is the part of a Slack app manifest the fake reads.
type manifest struct {
	Features struct {
		SlashCommands []struct {
			Command string `yaml:"command"`
		} `yaml:"slash_commands"`
	} `yaml:"features"`
	OAuthConfig struct {
		Scopes struct {
			Bot []string `yaml:"bot"`
		} `yaml:"scopes"`
	} `yaml:"oauth_config"`
	Settings struct {
		EventSubscriptions struct {
			BotEvents []string `yaml:"bot_events"`
		} `yaml:"event_subscriptions"`
		Interactivity struct {
			IsEnabled bool `yaml:"is_enabled"`
		} `yaml:"interactivity"`
		SocketModeEnabled bool `yaml:"socket_mode_enabled"`
	} `yaml:"settings"`
}

// ManifestApp is the app a Slack app manifest (YAML) installs.
func ManifestApp(raw []byte) (App, error) {
	var m manifest
	if err := yaml.Unmarshal(raw, &m); err != nil {
		return App{}, fmt.Errorf("slacktest: read app manifest: %w", err)
	}
	app := App{
		BotScopes:     m.OAuthConfig.Scopes.Bot,
		BotEvents:     m.Settings.EventSubscriptions.BotEvents,
		Interactivity: m.Settings.Interactivity.IsEnabled,
		SocketMode:    m.Settings.SocketModeEnabled,
	}
	for _, c := range m.Features.SlashCommands {
		app.SlashCommands = append(app.SlashCommands, c.Command)
	}
	return app, nil
}

// ShippedManifest is the path of docs/slack-app-manifest.yaml, found by
// walking up from the working directory (a test's package directory) to
// the module root.
func ShippedManifest() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "docs", "slack-app-manifest.yaml"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("slacktest: no go.mod above the working directory, so no docs/slack-app-manifest.yaml")
		}
		dir = parent
	}
}

// ShippedApp is the app docs/slack-app-manifest.yaml installs: what every
// fake workspace starts with, so the tests hold the shipped manifest to
// what the channel does. It panics if the manifest cannot be read (the
// tests run inside the repository).
func ShippedApp() App {
	path, err := ShippedManifest()
	if err == nil {
		var raw []byte
		if raw, err = os.ReadFile(path); err == nil {
			var app App
			if app, err = ManifestApp(raw); err == nil {
				return app
			}
		}
	}
	panic(fmt.Sprintf("slacktest: the shipped app manifest: %v", err))
}

// Install replaces the installed app (its scopes, events, settings), as
// reinstalling the app from another manifest would.
func (s *Server) Install(app App) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.app = app
}

func (a App) hasScope(scope string) bool { return slices.Contains(a.BotScopes, scope) }

// historyScope is the scope that reads messages in a conversation kind, and
// eventName the message event subscription that delivers them.
func historyScope(kind string) string {
	switch kind {
	case "group":
		return "groups:history"
	case "im":
		return "im:history"
	case "mpim":
		return "mpim:history"
	}
	return "channels:history"
}

func messageEvent(kind string) string {
	switch kind {
	case "group":
		return "message.groups"
	case "im":
		return "message.im"
	case "mpim":
		return "message.mpim"
	}
	return "message.channels"
}

// delivers says whether Slack sends the app an event of type eventType in
// a conversation of kind, and if not, why.
func (a App) delivers(eventType, kind string) (bool, string) {
	subscription, scope := messageEvent(kind), historyScope(kind)
	if eventType == "app_mention" {
		subscription, scope = "app_mention", "app_mentions:read"
	}
	var missing []string
	if !slices.Contains(a.BotEvents, subscription) {
		missing = append(missing, "the "+subscription+" event subscription")
	}
	if !a.hasScope(scope) {
		missing = append(missing, "the "+scope+" scope")
	}
	if len(missing) > 0 {
		return false, fmt.Sprintf("%s event in a %s conversation not sent: the app lacks %s", eventType, kind, strings.Join(missing, " and "))
	}
	return true, ""
}
