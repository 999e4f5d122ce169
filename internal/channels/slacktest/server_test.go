package slacktest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"nanohost/internal/channels/slacktest"
)

func client(s *slacktest.Server) *slack.Client {
	return slack.New(s.BotToken, slack.OptionAPIURL(s.APIURL()), slack.OptionAppLevelToken(s.AppToken))
}

func TestWebAPISpeaksSlackGo(t *testing.T) {
	s := slacktest.New()
	defer s.Close()
	s.AddChannel("C1", "general")
	api := client(s)
	ctx := context.Background()

	auth, err := api.AuthTestContext(ctx)
	if err != nil || auth.UserID != s.BotUserID {
		t.Fatalf("auth.test = %+v, %v", auth, err)
	}
	_, root, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("root", false))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := api.PostMessageContext(ctx, "C1", slack.MsgOptionText("reply", false), slack.MsgOptionTS(root)); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := api.UpdateMessageContext(ctx, "C1", root, slack.MsgOptionText("root v2", false)); err != nil {
		t.Fatal(err)
	}
	m, _ := s.Message("C1", root)
	if m.Text != "root v2" || len(m.Revisions) != 1 || m.Revisions[0].Text != "root" {
		t.Errorf("root = %+v, want edited once", m)
	}
	if th := s.Thread("C1", root); len(th) != 1 || th[0].Text != "reply" {
		t.Errorf("thread = %+v", th)
	}

	// Slack's limits are enforced, so a renderer bug shows up in tests.
	long := slack.NewSectionBlock(slack.NewTextBlockObject("mrkdwn", strings.Repeat("x", 3001), false, false), nil, nil)
	_, _, err = api.PostMessageContext(ctx, "C1", slack.MsgOptionBlocks(long))
	var se slack.SlackErrorResponse
	if !errors.As(err, &se) || se.Err != "invalid_blocks" {
		t.Errorf("3001-character section: err = %v, want invalid_blocks", err)
	}
	if _, _, err := api.PostMessageContext(ctx, "C9", slack.MsgOptionText("x", false)); err == nil || err.Error() != "channel_not_found" {
		t.Errorf("unknown channel: err = %v", err)
	}

	s.RateLimit("chat.postMessage", 1, 7)
	_, _, err = api.PostMessageContext(ctx, "C1", slack.MsgOptionText("x", false))
	var rl *slack.RateLimitedError
	if !errors.As(err, &rl) || rl.RetryAfter != 7*time.Second {
		t.Errorf("rate limited: err = %v, want Retry-After 7s", err)
	}
	s.SetGroup("S1", "U1", "U2")
	if users, err := api.GetUserGroupMembersContext(ctx, "S1"); err != nil || len(users) != 2 {
		t.Errorf("usergroups.users.list = %v, %v", users, err)
	}
	if _, err := slack.New("xoxb-wrong", slack.OptionAPIURL(s.APIURL())).AuthTestContext(ctx); err == nil || err.Error() != "invalid_auth" {
		t.Errorf("wrong token: err = %v, want invalid_auth", err)
	}
}
