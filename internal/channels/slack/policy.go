package slack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"nanohost/internal/channels"
	"nanohost/internal/runs"
)

// DefaultGroupCacheTTL is how long user group memberships are trusted
// before usergroups.users.list is asked again.
const DefaultGroupCacheTTL = 5 * time.Minute

// groupMissRefresh is how old a cached member list must be before a user
// missing from it makes the authorizer ask Slack again: someone just added
// to a group is not refused for the whole TTL, and clicks by people who
// are not members cost at most one lookup per group this often.
const groupMissRefresh = 15 * time.Second

// Policy says who may do what through Slack. Everything is denied unless a
// rule allows it, and the Slack channel refuses to start without a policy.
//
// A principal is a user id ("U0123ABCD"), a user group ("group:S0123ABCD",
// resolved with usergroups.users.list), or "*" (everyone in the allowed
// channels).
type Policy struct {
	// Channels are the conversation ids where runs may start and post.
	Channels []string `json:"channels" yaml:"channels"`
	// Starters may start, resume and cancel runs.
	Starters []string `json:"starters" yaml:"starters"`
	// Approvers may answer gates. A node's approvers attribute narrows this
	// further for its gate (it can never grant more: pipelines may be
	// written by agents).
	Approvers []string `json:"approvers" yaml:"approvers"`
	// PreventSelfApproval stops whoever started a run from answering its gates.
	PreventSelfApproval bool `json:"prevent_self_approval" yaml:"prevent_self_approval"`
	// GroupCacheTTL overrides DefaultGroupCacheTTL.
	GroupCacheTTL time.Duration `json:"group_cache_ttl" yaml:"group_cache_ttl"`
}

var (
	channelIDPattern = regexp.MustCompile(`^[CGD][A-Z0-9]{2,}$`)
	groupIDPattern   = regexp.MustCompile(`^S[A-Z0-9]{2,}$`)
)

// Validate says which settings are missing or malformed, so the error can
// be fixed without reading code.
func (p Policy) Validate() error {
	var problems []string
	if len(p.Channels) == 0 {
		problems = append(problems, `set slack.policy.channels to the Slack channel ids where runs may start and post (e.g. ["C0123ABCD"]; the id is at the bottom of the channel's About tab)`)
	}
	for i, c := range p.Channels {
		if !channelIDPattern.MatchString(c) {
			problems = append(problems, fmt.Sprintf("slack.policy.channels[%d] = %q is not a channel id (want C…, G… or D…, not a #name)", i, c))
		}
	}
	if len(p.Starters) == 0 && len(p.Approvers) == 0 {
		problems = append(problems, `set slack.policy.starters (who may start runs) and/or slack.policy.approvers (who may answer gates): user ids "U…", user groups "group:S…", or "*" for everyone in those channels`)
	}
	problems = append(problems, principalProblems("slack.policy.starters", p.Starters)...)
	problems = append(problems, principalProblems("slack.policy.approvers", p.Approvers)...)
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("slack: the authorization policy is incomplete, so the Slack channel will not start (everything is denied by default): %s",
		strings.Join(problems, "; "))
}

func principalProblems(setting string, list []string) []string {
	var out []string
	for i, p := range list {
		if !validPrincipal(p) {
			out = append(out, fmt.Sprintf("%s[%d] = %q is not a user id (U…/W…), group:S… or *", setting, i, p))
		}
	}
	return out
}

func validPrincipal(p string) bool {
	if p == "*" || userIDPattern.MatchString(p) {
		return true
	}
	g, ok := strings.CutPrefix(p, "group:")
	return ok && groupIDPattern.MatchString(g)
}

// groupLister fetches a user group's members (usergroups.users.list).
type groupLister func(ctx context.Context, group string) ([]string, error)

// authorizer applies a Policy; it logs every decision.
type authorizer struct {
	policy  Policy
	members groupLister
	ttl     time.Duration
	log     *slog.Logger
	now     func() time.Time

	mu    sync.Mutex
	cache map[string]groupEntry
}

type groupEntry struct {
	members []string
	fetched time.Time
}

func newAuthorizer(p Policy, members groupLister, log *slog.Logger) *authorizer {
	ttl := p.GroupCacheTTL
	if ttl <= 0 {
		ttl = DefaultGroupCacheTTL
	}
	return &authorizer{policy: p, members: members, ttl: ttl, log: log, now: time.Now, cache: make(map[string]groupEntry)}
}

func (a *authorizer) chatAllowed(chat string) bool { return slices.Contains(a.policy.Channels, chat) }

var (
	errNotEnabled = errors.New("nanohost is not enabled in this channel (an admin can add its id to slack.policy.channels)")
	errNotStarter = errors.New("you are not allowed to start or change runs here (slack.policy.starters)")
)

// mayChange decides, as a command arrives, whether user may start, resume
// or cancel a run in chat: refused commands are answered in the ack.
func (a *authorizer) mayChange(ctx context.Context, user, chat string, cmd channels.Command) error {
	err := a.checkChange(ctx, user, chat)
	a.logDecision("change_run", err, "user", user, "chat", chat, "command", string(cmd.Kind), "run", cmd.RunID)
	return err
}

func (a *authorizer) checkChange(ctx context.Context, user, chat string) error {
	if !a.chatAllowed(chat) {
		return errNotEnabled
	}
	ok, err := a.inAny(ctx, user, a.policy.Starters)
	if err != nil {
		return err
	}
	if !ok {
		return errNotStarter
	}
	return nil
}

// MayRegister decides whether user may register a group from chat (the
// main group's /register): the same people who may start runs, since a
// registered group gets its own agent, workspace and containers.
func (a *authorizer) MayRegister(ctx context.Context, user, chat string) error {
	err := a.checkChange(ctx, user, chat)
	if errors.Is(err, errNotStarter) {
		err = errors.New("you are not allowed to register groups (only slack.policy.starters may)")
	}
	a.logDecision("register_group", err, "user", user, "chat", chat)
	return err
}

// MayControl implements runs.Policy: who may start, cancel and resume runs
// in a channel (slack.policy.channels and .starters).
func (a *authorizer) MayControl(ctx context.Context, who runs.Principal, chat string) error {
	err := a.checkChange(ctx, who.User, chat)
	a.logDecision("change_run", err, "user", who.User, "chat", chat)
	return err
}

// MayAnswer implements runs.Policy: who may answer gate g of run
// (slack.policy.approvers, the gate's approvers, prevent_self_approval).
func (a *authorizer) MayAnswer(ctx context.Context, who runs.Principal, run runs.Run, g runs.Gate, option int) error {
	err := a.checkAnswer(ctx, who.User, run, g)
	a.logDecision("answer_gate", err, "user", who.User, "chat", run.ChatID, "run", g.RunID, "gate", g.GateID, "option", option)
	return err
}

func (a *authorizer) checkAnswer(ctx context.Context, user string, run runs.Run, g runs.Gate) error {
	if !a.chatAllowed(run.ChatID) {
		return errors.New("nanohost is not enabled in this channel (slack.policy.channels)")
	}
	if a.policy.PreventSelfApproval && run.StartedBy != "" && user == run.StartedBy {
		return errors.New("you started this run, and self-approval is turned off (slack.policy.prevent_self_approval): someone else has to answer")
	}
	ok, err := a.inAny(ctx, user, a.policy.Approvers)
	if err != nil {
		return err
	}
	if !ok {
		return errors.New("you are not allowed to answer gates here (slack.policy.approvers)")
	}
	if strings.TrimSpace(g.Approvers) == "" {
		return nil
	}
	var gateApprovers []string
	for p := range strings.SplitSeq(g.Approvers, ",") {
		if p = strings.TrimSpace(p); p != "" {
			gateApprovers = append(gateApprovers, p)
		}
	}
	if bad := principalProblems("approvers", gateApprovers); len(bad) > 0 {
		return fmt.Errorf("this gate's approvers attribute is malformed, so nobody may answer it: %s", strings.Join(bad, "; "))
	}
	if ok, err = a.inAny(ctx, user, gateApprovers); err != nil {
		return err
	} else if !ok {
		return errors.New("only this gate's approvers may answer it")
	}
	return nil
}

// inAny reports whether user is one of the principals. A user missing from
// a group's cached members is looked up again once the list is a little
// old (groupMissRefresh), in case they were added since.
func (a *authorizer) inAny(ctx context.Context, user string, principals []string) (bool, error) {
	for _, p := range principals {
		if p == "*" || p == user {
			return true, nil
		}
	}
	var groups []string
	for _, p := range principals {
		if group, ok := strings.CutPrefix(p, "group:"); ok {
			groups = append(groups, group)
		}
	}
	for _, refresh := range []time.Duration{a.ttl, groupMissRefresh} {
		for _, group := range groups {
			members, err := a.groupMembers(ctx, group, refresh)
			if err != nil {
				return false, err
			}
			if slices.Contains(members, user) {
				return true, nil
			}
		}
	}
	return false, nil
}

// groupMembers returns a group's members, from the cache when the list is
// younger than maxAge. If Slack cannot be asked, a stale list is better
// than locking everyone out.
func (a *authorizer) groupMembers(ctx context.Context, group string, maxAge time.Duration) ([]string, error) {
	a.mu.Lock()
	entry, cached := a.cache[group]
	a.mu.Unlock()
	if cached && a.now().Sub(entry.fetched) < maxAge {
		return entry.members, nil
	}
	members, err := a.members(ctx, group)
	if err != nil {
		if cached {
			a.log.Warn("slack: user group lookup failed; using the cached members", "group", group, "err", err)
			return entry.members, nil
		}
		return nil, fmt.Errorf("could not check membership of user group %s (%v); try again in a moment", group, err)
	}
	a.mu.Lock()
	a.cache[group] = groupEntry{members: members, fetched: a.now()}
	a.mu.Unlock()
	return members, nil
}

func (a *authorizer) logDecision(action string, err error, attrs ...any) {
	attrs = append(attrs, "action", action, "allowed", err == nil)
	if err != nil {
		attrs = append(attrs, "reason", err.Error())
	}
	a.log.Info("slack: authorization", attrs...)
}
