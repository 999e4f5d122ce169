package slack_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"nanohost/internal/channels/slacktest"
)

// The shipped manifest asks for what the channel uses — Socket Mode, gate
// buttons, /pipeline, the events it reads and the scopes of the Web API
// methods it calls — and the setup guide shows it verbatim.
func TestManifestGivesTheChannelWhatItUses(t *testing.T) {
	raw, err := os.ReadFile("../../../docs/slack-app-manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	app, err := slacktest.ManifestApp(raw)
	if err != nil {
		t.Fatal(err)
	}
	if !app.SocketMode || !app.Interactivity {
		t.Error("the manifest must turn on Socket Mode (no public URL) and interactivity (gate buttons)")
	}
	if !slices.Equal(app.SlashCommands, []string{"/pipeline", "/schedule"}) {
		t.Errorf("slash commands %v, want /pipeline and /schedule", app.SlashCommands)
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
		if !slices.Contains(app.BotScopes, scope) {
			t.Errorf("the manifest lacks the bot scope %s, needed for %s", scope, why)
		}
	}
	for _, event := range []string{"app_mention", "message.channels", "message.groups", "message.im"} {
		if !slices.Contains(app.BotEvents, event) {
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
