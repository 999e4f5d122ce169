package slack_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// appManifest is the part of a Slack app manifest the channel depends on.
type appManifest struct {
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

// The shipped manifest asks for what the channel uses — Socket Mode, gate
// buttons, /pipeline, the events it reads and the scopes of the Web API
// methods it calls — and the setup guide shows it verbatim.
func TestManifestGivesTheChannelWhatItUses(t *testing.T) {
	raw, err := os.ReadFile("../../../docs/slack-app-manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var m appManifest
	if err := yaml.Unmarshal(raw, &m); err != nil {
		t.Fatalf("the manifest is not valid YAML: %v", err)
	}
	if !m.Settings.SocketModeEnabled || !m.Settings.Interactivity.IsEnabled {
		t.Error("the manifest must turn on Socket Mode (no public URL) and interactivity (gate buttons)")
	}
	if len(m.Features.SlashCommands) != 1 || m.Features.SlashCommands[0].Command != "/pipeline" {
		t.Errorf("slash commands %+v, want /pipeline", m.Features.SlashCommands)
	}
	for scope, why := range map[string]string{
		"chat:write":        "chat.postMessage, chat.update, chat.postEphemeral",
		"commands":          "/pipeline",
		"usergroups:read":   "usergroups.users.list (group:S… in the policy)",
		"users:read":        "users.info (who answered a gate)",
		"app_mentions:read": "app_mention events",
		"channels:history":  "message.channels events (thread replies) and conversations.replies/history (finding a post whose answer was lost)",
		"groups:history":    "message.groups events: thread replies in private channels (G… ids in the policy)",
		"im:history":        "message.im events: messages in direct messages with the bot (D… ids in the policy)",
	} {
		if !slices.Contains(m.OAuthConfig.Scopes.Bot, scope) {
			t.Errorf("the manifest lacks the bot scope %s, needed for %s", scope, why)
		}
	}
	for _, event := range []string{"app_mention", "message.channels", "message.groups", "message.im"} {
		if !slices.Contains(m.Settings.EventSubscriptions.BotEvents, event) {
			t.Errorf("the manifest does not subscribe to %s", event)
		}
	}
	guide, err := os.ReadFile("../../../docs/slack-setup.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(guide), "```yaml\n"+string(raw)+"```") {
		t.Error("docs/slack-setup.md must show docs/slack-app-manifest.yaml verbatim in a ```yaml block")
	}
}
