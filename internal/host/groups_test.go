package host

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"nanohost/internal/channels"
	"nanohost/internal/channels/slacktest"
	"nanohost/internal/config"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/store"
	"nanohost/internal/testkit"
)

// The fake workspace of the group tests: an ops channel (the main
// group's), a team channel (a group woken by the word "nano") and a new one.
const (
	opsChat  = "C0OPS"
	teamChat = "C0TEAM"
	newChat  = "C0NEW"
	alice    = "U0ALICE"
)

func groupsWorkspace(t *testing.T) *slacktest.Server {
	t.Helper()
	fake := slacktest.New()
	t.Cleanup(fake.Close)
	fake.AddChannel(opsChat, "ops")
	fake.AddChannel(teamChat, "team")
	fake.AddChannel(newChat, "new")
	fake.AddUser(alice, "Alice")
	return fake
}

// groupsSetup is a host on that workspace whose agents say which group
// they answer for.
func groupsSetup(fake *slacktest.Server, dir string) hostSetup {
	return hostSetup{
		dir: dir, slack: fake,
		answer: func(_ context.Context, req engine.Request) (engine.Result, error) {
			return engine.Result{Text: "answer from " + strings.TrimPrefix(req.RunID, "chat-")}, nil
		},
		configure: func(c *config.Config) {
			c.Slack.Policy = config.SlackPolicy{Channels: []string{opsChat, teamChat, newChat}, Starters: []string{alice}, Approvers: []string{alice}}
			c.Groups = []config.Group{
				{Folder: "main", Name: "Ops", Chat: "slack:" + opsChat, Main: true},
				{Folder: "team", Name: "Team", Chat: "slack:" + teamChat, Trigger: "nano"},
			}
		},
	}
}

// botSaid reports whether the bot posted text (in any thread) in channel.
func botSaid(fake *slacktest.Server, channel, text string) bool {
	for _, m := range fake.Messages(channel) {
		if m.FromBot() && strings.Contains(m.Text, text) {
			return true
		}
	}
	return false
}

func waitBot(t *testing.T, fake *slacktest.Server, channel, text string) {
	t.Helper()
	if !fake.WaitFor(10*time.Second, func() bool { return botSaid(fake, channel, text) }) {
		t.Fatalf("the bot never said %q in %s; it said: %v", text, channel, fake.BotMessages(channel))
	}
}

// Configured groups get their workspace with CLAUDE.md memory; the main
// group's chat registers a new one (its folders are made, it survives a
// restart, its trigger word wakes its agent); no other group may register.
func TestGroupsFromConfigAndRegisteredFromTheMainChat(t *testing.T) {
	fake := groupsWorkspace(t)
	th := launch(t, groupsSetup(fake, ""))
	for _, f := range []string{"groups/main/CLAUDE.md", "groups/team/CLAUDE.md", "ipc/team/tasks"} {
		if _, err := os.Stat(filepath.Join(th.DataDir(), f)); err != nil {
			t.Errorf("configured group: %v", err)
		}
	}

	if _, err := fake.Mention(teamChat, alice, "/register C0NEW web"); err != nil {
		t.Fatal(err)
	}
	waitBot(t, fake, teamChat, "Only the main group's chat may register groups.")
	if _, err := fake.Mention(opsChat, alice, "/register C0NEW web nano"); err != nil {
		t.Fatal(err)
	}
	waitBot(t, fake, opsChat, "Registered group web on slack:C0NEW")
	g, err := th.store.GetGroup(context.Background(), "web")
	if err != nil || g.ChatID != newChat || g.Trigger != "nano" || g.IsMain {
		t.Fatalf("registered group = %+v, %v", g, err)
	}
	for _, f := range []string{"groups/web/CLAUDE.md", "ipc/web/tasks", "ipc/web/messages"} {
		if _, err := os.Stat(filepath.Join(th.DataDir(), f)); err != nil {
			t.Errorf("registered group: %v", err)
		}
	}
	th.stop()

	th = launch(t, groupsSetup(fake, th.dir))
	if _, err := fake.Say(newChat, alice, "nanotech is neat"); err != nil { // not the word
		t.Fatal(err)
	}
	if _, err := fake.Say(newChat, alice, "Nano, what changed?"); err != nil {
		t.Fatal(err)
	}
	waitBot(t, fake, newChat, "answer from web")
	// An answer to the other message would have come by the barrier's.
	if _, err := fake.Barrier(newChat, alice, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if n := len(fake.BotMessages(newChat)); n != 2 {
		t.Errorf("the bot posted %d messages in the new group's channel, want the one answer and the barrier's: %v", n, fake.BotMessages(newChat))
	}
	if errs := fake.ProtocolErrors(); len(errs) > 0 {
		t.Errorf("Slack protocol errors: %v", errs)
	}
}

// The main group's agent may post to any registered chat; another group's
// only to its own.
func TestOnlyTheMainGroupPostsToOtherChats(t *testing.T) {
	fake := groupsWorkspace(t)
	th := launch(t, groupsSetup(fake, ""))
	th.writeGroupRequest(t, "main", "messages", "m1", map[string]any{"type": "send_message", "chat": teamChat, "text": "heads-up from ops"})
	if r := th.groupResponse(t, "main", "m1"); r["status"] != "accepted" {
		t.Fatalf("main group to the team chat: %v", r)
	}
	waitBot(t, fake, teamChat, "heads-up from ops")

	th.writeGroupRequest(t, "team", "messages", "t1", map[string]any{"type": "send_message", "chat": opsChat, "text": "spoofed"})
	r := th.groupResponse(t, "team", "t1")
	if reason, _ := r["reason"].(string); r["status"] == "accepted" || !strings.Contains(reason, "may only send messages in its own chat") {
		t.Errorf("team group to the ops chat: %v; want a refusal", r)
	}
	th.writeGroupRequest(t, "team", "messages", "t2", map[string]any{"type": "send_message", "text": "build is green"})
	if r := th.groupResponse(t, "team", "t2"); r["status"] != "accepted" {
		t.Fatalf("team group to its own chat: %v", r)
	}
	waitBot(t, fake, teamChat, "build is green")
	if botSaid(fake, opsChat, "spoofed") {
		t.Error("a non-main group posted into the main group's chat")
	}
}

// triggered decides which messages wake a group's agent.
func TestTriggerMentionOrWord(t *testing.T) {
	word := store.Group{Trigger: "nano"}
	mention := store.Group{Trigger: "@mention"}
	tests := []struct {
		g    store.Group
		in   channels.Inbound
		want bool
	}{
		{mention, channels.Inbound{Kind: channels.KindMention, Text: "hi"}, true},
		{mention, channels.Inbound{Kind: channels.KindMessage, Text: "hi nano"}, false},
		{word, channels.Inbound{Kind: channels.KindMessage, Text: "hey Nano, look"}, true},
		{word, channels.Inbound{Kind: channels.KindMessage, Text: "nano"}, true},
		{word, channels.Inbound{Kind: channels.KindMessage, Text: "nanotech"}, false},
		{word, channels.Inbound{Kind: channels.KindMention, Text: "no word"}, true},
		{mention, channels.Inbound{Kind: channels.KindMessage, Channel: "console", Text: "anything"}, true},
	}
	for _, tt := range tests {
		if got := triggered(tt.g, tt.in); got != tt.want {
			t.Errorf("trigger %q, %s %q: %v, want %v", tt.g.Trigger, tt.in.Kind, tt.in.Text, got, tt.want)
		}
	}
}

// On Slack, /register is for starters (slack.policy.starters: a user id or
// a member of a group:S… user group): anyone else in the main group's
// channel is told privately, and nothing is registered.
func TestRegisterOnSlackNeedsAStarter(t *testing.T) {
	const bob, carol = "U0BOB", "U0CAROL"
	fake := groupsWorkspace(t)
	fake.AddUser(bob, "Bob")
	fake.AddUser(carol, "Carol")
	fake.SetGroup("S0ADMINS", carol)
	s := groupsSetup(fake, "")
	base := s.configure
	s.configure = func(c *config.Config) {
		base(c)
		c.Slack.Policy.Starters = []string{alice, "group:S0ADMINS"}
	}
	th := launch(t, s)

	if _, err := fake.Mention(opsChat, bob, "/register C0NEW web"); err != nil {
		t.Fatal(err)
	}
	refused := func() bool {
		for _, e := range fake.Ephemerals(opsChat, bob) {
			if strings.Contains(e.Text+string(e.Blocks), "only slack.policy.starters may") {
				return true
			}
		}
		return false
	}
	if !fake.WaitFor(10*time.Second, refused) {
		t.Fatalf("bob was not told privately that he may not register; ephemerals: %+v, bot said: %v", fake.Ephemerals(opsChat, bob), fake.BotMessages(opsChat))
	}
	if _, err := th.store.GetGroup(context.Background(), "web"); err == nil {
		t.Fatal("a non-starter registered group web")
	}
	if botSaid(fake, opsChat, "Registered group") {
		t.Errorf("the refusal was public or the group was registered: %v", fake.BotMessages(opsChat))
	}

	if _, err := fake.Mention(opsChat, carol, "/register C0NEW web"); err != nil {
		t.Fatal(err)
	}
	waitBot(t, fake, opsChat, "Registered group web on slack:C0NEW")
	if g, err := th.store.GetGroup(context.Background(), "web"); err != nil || g.ChatID != newChat {
		t.Fatalf("group registered by a member of a starters user group = %+v, %v", g, err)
	}
}

// /register at the console names the conflict and changes nothing: the
// console is one chat, the main group's, so it cannot be another group's
// home (it used to be renamed to the new group's name, and the answer was
// a misleading "not found").
func TestRegisterRefusalsNameTheConflictAndChangeNothing(t *testing.T) {
	th := startTestHost(t, "", succeed)
	ctx := context.Background()
	before, err := th.store.GetChat(ctx, "console")
	if err != nil {
		t.Fatal(err)
	}
	typeAt := func(line string) {
		t.Helper()
		if _, err := io.WriteString(th.typing, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	typeAt("/register console:lab lab")
	testkit.WaitUntil(t, 10*time.Second, "the refusal is shown", func() bool {
		return strings.Contains(th.screen.Text(), "✗ Not registered, nothing changed: the console is a single chat, and it already belongs to group main")
	})
	typeAt("/register slack:C0NEW main")
	testkit.WaitUntil(t, 10*time.Second, "the folder refusal is shown", func() bool {
		return strings.Contains(th.screen.Text(), "✗ Not registered, nothing changed: a group named main already exists (its chat is console): choose another folder name.")
	})
	if strings.Contains(th.screen.Text(), "not found") {
		t.Errorf("a refusal still says 'not found':\n%s", th.screen.Text())
	}
	after, err := th.store.GetChat(ctx, "console")
	if err != nil || after.Name != before.Name || after.GroupFolder != "main" {
		t.Errorf("the console chat changed: %+v → %+v (%v)", before, after, err)
	}
	groups, err := th.store.ListGroups(ctx)
	if err != nil || len(groups) != 1 || groups[0].Folder != "main" || groups[0].ChatID != "console" {
		t.Errorf("groups after the refusals: %+v (%v)", groups, err)
	}
	if _, err := th.store.GetChat(ctx, "C0NEW"); err == nil {
		t.Error("a refused /register saved its chat")
	}
	if _, err := os.Stat(filepath.Join(th.DataDir(), "groups", "lab")); err == nil {
		t.Error("a refused /register made the group's folder")
	}
}
