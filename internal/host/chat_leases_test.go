package host

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"nanohost/internal/config"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/store/storetest"
	"nanohost/internal/testkit"
)

// Among replicas, a host whose group lease another replica took over
// (it was cut off longer than lease_ttl) stops answering for the group at
// once: the answer its agent is working on is not posted, and messages
// wait, stored, for the holder. When the holder stops renewing (it died),
// the host takes the group back and answers each waiting message once.
func TestChatStopsWhenItsGroupLeaseIsTakenAndTakesItBack(t *testing.T) {
	url := storetest.PostgresURL(t)
	fake := groupsWorkspace(t)
	setup := groupsSetup(fake, "")
	configure := setup.configure
	setup.configure = func(c *config.Config) {
		configure(c)
		c.Store.URL = config.Secret(url)
		c.Replica = config.Replica{ID: "replica-a", LeaseTTL: 900 * time.Millisecond}
	}
	blocked, lost := make(chan struct{}), make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	var asked []string // the prompts the agent was given
	setup.answer = func(ctx context.Context, req engine.Request) (engine.Result, error) {
		mu.Lock()
		asked = append(asked, req.Prompt)
		mu.Unlock()
		first := false
		if strings.Contains(req.Prompt, "slow") {
			once.Do(func() { first = true })
		}
		if first {
			close(blocked)
			<-ctx.Done() // working on it when the group is lost
			close(lost)
			return engine.Result{}, ctx.Err()
		}
		return engine.Result{Text: "answer", SessionID: "s-1"}, nil
	}
	askedAbout := func(word string) bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.ContainsFunc(asked, func(p string) bool { return strings.Contains(p, word) })
	}
	th := launch(t, setup)
	db, err := sql.Open("pgx", th.cfg.StoreURL()) // NANOHOST_TEST_STORE=postgres picks its own database

	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	unanswered := func() int {
		left, err := th.store.UnprocessedMessages(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return len(left)
	}

	first, err := fake.Mention(opsChat, alice, "hello")
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, 10*time.Second, "the host answers, holding the group", func() bool { return botPosts(fake, first) == 1 })
	slow, err := fake.Mention(opsChat, alice, "slow question")
	if err != nil {
		t.Fatal(err)
	}
	<-blocked
	// Replica B takes the group over, as it would once A's lease expired;
	// B holds it until the test says B died.
	if _, err := db.Exec(`UPDATE leases SET owner = 'replica-b', expires_at = now() + interval '1 hour' WHERE kind = 'group' AND key = 'main'`); err != nil {
		t.Fatal(err)
	}
	late, err := fake.Mention(opsChat, alice, "late question")
	if err != nil {
		t.Fatal(err)
	}
	select { // the host's next renewal finds the lease B's: its agent's turn is called off
	case <-lost:
	case <-time.After(10 * time.Second):
		t.Fatal("the host's agent went on answering for a group replica B holds")
	}
	testkit.WaitUntil(t, 10*time.Second, "the late question is stored, unanswered", func() bool { return unanswered() == 2 })
	if n := botPosts(fake, slow) + botPosts(fake, late); n != 0 || askedAbout("late") {
		t.Fatalf("the host answered %d messages of a group replica B holds (its agent asked about the late one: %v)", n, askedAbout("late"))
	}

	// B stops renewing (it died): its lease expires, the host takes the group back.
	if _, err := db.Exec(`UPDATE leases SET expires_at = now() - interval '1 second' WHERE kind = 'group' AND key = 'main'`); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, 10*time.Second, "the host answers both waiting messages after B's lease expired", func() bool {
		return unanswered() == 0 && botPosts(fake, slow) == 1 && botPosts(fake, late) == 1
	})
	if _, err := fake.Barrier(opsChat, alice, 10*time.Second); err != nil { // a second answer would have come by now
		t.Fatal(err)
	}
	if a, b, c := botPosts(fake, first), botPosts(fake, slow), botPosts(fake, late); a != 1 || b != 1 || c != 1 {
		t.Errorf("answers per question: %d, %d, %d; want one each", a, b, c)
	}
	var owner string
	if err := db.QueryRow(`SELECT owner FROM leases WHERE kind = 'group' AND key = 'main'`).Scan(&owner); err != nil || owner != "replica-a" {
		t.Errorf("the group's lease is %q's (%v), want replica-a's again", owner, err)
	}
}
