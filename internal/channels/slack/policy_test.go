package slack

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	slackgo "github.com/slack-go/slack"

	"nanohost/internal/channels/slacktest"
	"nanohost/internal/runs"
)

// groups is a usergroups.users.list stand-in that counts calls and can fail.
type groups struct {
	members map[string][]string
	calls   int
	down    bool
}

func (g *groups) list(_ context.Context, group string) ([]string, error) {
	g.calls++
	if g.down {
		return nil, errors.New("slack unreachable")
	}
	return g.members[group], nil
}

func testAuthorizer(p Policy, g *groups) (*authorizer, *time.Time) {
	a := newAuthorizer(p, g.list, slog.New(slog.DiscardHandler))
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	a.now = func() time.Time { return now }
	return a, &now
}

func TestGroupMembershipIsCachedForItsTTL(t *testing.T) {
	g := &groups{members: map[string][]string{"S0SRE": {"U0BOB"}}}
	a, now := testAuthorizer(Policy{Channels: []string{"C1"}, Approvers: []string{"group:S0SRE"}, GroupCacheTTL: time.Minute}, g)
	ref := gateIn("C1", "")
	ctx := context.Background()

	for range 3 {
		if err := a.answer(ctx, "U0BOB", ref); err != nil {
			t.Fatal(err)
		}
	}
	if g.calls != 1 {
		t.Errorf("%d usergroups.users.list calls for 3 checks within the TTL, want 1", g.calls)
	}
	g.members["S0SRE"] = nil // bob leaves the group
	*now = now.Add(2 * time.Minute)
	if err := a.answer(ctx, "U0BOB", ref); err == nil {
		t.Error("after the TTL a removed member must be refused")
	}
	// Slack down: the last known list is used rather than locking everyone out…
	g.members["S0SRE"] = []string{"U0BOB"}
	*now = now.Add(2 * time.Minute)
	_ = a.answer(ctx, "U0BOB", ref)
	g.down = true
	*now = now.Add(2 * time.Minute)
	if err := a.answer(ctx, "U0BOB", ref); err != nil {
		t.Errorf("with Slack down, the cached membership should be used: %v", err)
	}
	// …but a group never seen cannot be vouched for.
	b, _ := testAuthorizer(Policy{Channels: []string{"C1"}, Approvers: []string{"group:S0NEW"}}, &groups{down: true})
	if err := b.answer(ctx, "U0BOB", ref); err == nil || !strings.Contains(err.Error(), "could not check membership of user group S0NEW") {
		t.Errorf("unknown group while Slack is down: %v", err)
	}
}

func TestMalformedGateApproversDenyEveryone(t *testing.T) {
	a, _ := testAuthorizer(Policy{Channels: []string{"C1"}, Approvers: []string{"*"}}, &groups{})
	err := a.answer(context.Background(), "U0BOB", gateIn("C1", "bob, U0BOB"))
	if err == nil || !strings.Contains(err.Error(), `approvers[0] = "bob"`) {
		t.Errorf("a malformed approvers attribute must deny and say why, got %v", err)
	}
	if err := a.answer(context.Background(), "U0BOB", gateIn("C2", "")); err == nil {
		t.Error("a gate in a channel outside the policy must be refused")
	}
}

// Someone just added to a user group is not refused for the whole cache
// TTL: a miss asks usergroups.users.list again once the cached list is a
// little old, and people who are not members cannot make every click cost
// a lookup.
func TestGroupMissRefreshesTheCachedMembers(t *testing.T) {
	fake := slacktest.New()
	defer fake.Close()
	fake.SetGroup("S0SRE", "U0BOB")
	api := slackgo.New(fake.BotToken, slackgo.OptionAPIURL(fake.APIURL()))
	a := newAuthorizer(Policy{Channels: []string{"C1"}, Approvers: []string{"group:S0SRE"}},
		func(ctx context.Context, group string) ([]string, error) {
			return api.GetUserGroupMembersContext(ctx, group)
		},
		slog.New(slog.DiscardHandler))
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	a.now = func() time.Time { return now }
	ctx := context.Background()
	ref := gateIn("C1", "")
	lookups := func() int { return fake.Calls("usergroups.users.list") }

	if err := a.answer(ctx, "U0BOB", ref); err != nil {
		t.Fatal(err)
	}
	fake.SetGroup("S0SRE", "U0BOB", "U0CAROL") // Carol joins the SRE group
	now = now.Add(groupMissRefresh / 2)
	if err := a.answer(ctx, "U0CAROL", ref); err == nil {
		t.Error("a list fetched moments ago is trusted; Carol should be refused until it is a little old")
	}
	if n := lookups(); n != 1 {
		t.Errorf("%d lookups; a miss on a list younger than %v must not ask Slack again", n, groupMissRefresh)
	}
	now = now.Add(groupMissRefresh)
	if err := a.answer(ctx, "U0CAROL", ref); err != nil {
		t.Errorf("Carol joined the group %v ago and was refused (the cache TTL is %v): %v", groupMissRefresh, DefaultGroupCacheTTL, err)
	}
	for range 5 {
		_ = a.answer(ctx, "U0MALLORY", ref)
	}
	if n := lookups(); n != 2 {
		t.Errorf("%d lookups after repeated clicks by a non-member; want 2 (the refresh for Carol only)", n)
	}
}

// gateRef is a gate of a run reporting to a chat, as MayAnswer sees it.
type gateRef struct {
	run  runs.Run
	gate runs.Gate
}

func gateIn(chat, approvers string) gateRef {
	return gateRef{runs.Run{ID: "r", ChatID: chat}, runs.Gate{RunID: "r", GateID: "g", Approvers: approvers}}
}

// answer asks the policy whether user may answer the gate.
func (a *authorizer) answer(ctx context.Context, user string, ref gateRef) error {
	return a.MayAnswer(ctx, runs.Principal{Endpoint: "slack", User: user, Chat: ref.run.ChatID}, ref.run, ref.gate, 1)
}
