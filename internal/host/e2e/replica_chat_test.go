package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"nanohost/internal/testkit"
)

// A group's chat conversation belongs to one replica at a time: the holder
// of the group's lease runs its agent container and answers its messages.
// A message delivered to the other replica's Slack socket is answered by
// the holder, once. When the holder is SIGKILLed, the next message — on
// the survivor's socket — is answered once, by a container the survivor
// started resuming the agent session the dead replica's agent reported.
func TestReplicaChatSessionMovesAfterKill(t *testing.T) {
	rs := newReplicas(t, map[string]any{"default": "Agent answer"}, nil)
	ctx := context.Background()
	a := rs.start("replica-a")
	st := rs.store()
	aConns := rs.fake.ConnectionNumbers()

	first, err := rs.fake.Mention(opsChat, alice, "first question")
	if err != nil {
		t.Fatal(err)
	}
	waitSlack(t, rs.fake, 60*time.Second, "replica A answers the first question", func() bool { return botReplies(rs.fake, first) == 1 })
	var session string
	testkit.WaitUntil(t, 10*time.Second, "A's agent session is recorded", func() bool {
		session, _ = st.GetSession(ctx, "main", "")
		return session != ""
	})

	b := rs.start("replica-b")
	bConns := slices.DeleteFunc(rs.fake.ConnectionNumbers(), func(n int) bool { return slices.Contains(aConns, n) })
	rs.fake.Route(func(n int) bool { return slices.Contains(bConns, n) })
	t.Cleanup(func() { rs.fake.Route(nil) })
	asked := time.Now()
	second, err := rs.fake.Mention(opsChat, alice, "second question, to B's socket")
	if err != nil {
		t.Fatal(err)
	}
	waitSlack(t, rs.fake, 30*time.Second, "the second question, delivered to B, is answered", func() bool { return botReplies(rs.fake, second) >= 1 })
	t.Logf("the second question, delivered to B, was answered by A %s after it was asked", time.Since(asked).Round(time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("A:\n%s\nB:\n%s", grepLog(a.log(), "chat", "group", "message"), grepLog(b.log(), "chat", "group", "message"))
		}
	})
	if logged(b, "this replica now holds the group's conversation", "main") {
		t.Fatalf("replica B took the group while A holds it:\nB:\n%s", b.log())
	}
	if !logged(a, "answering a stored message nobody answered yet", "main") {
		t.Errorf("A did not take the message B stored; A's log:\n%s", a.log())
	}

	// Killed as soon as its answer shows, A may not have recorded it: B
	// finds it in the thread and does not post it again.
	a.kill(t)
	rs.fake.Route(nil)
	killed := time.Now()
	third, err := rs.fake.Mention(opsChat, alice, "third question, after A died")
	if err != nil {
		t.Fatal(err)
	}
	waitSlack(t, rs.fake, 60*time.Second, "replica B answers the third question", func() bool { return botReplies(rs.fake, third) >= 1 })
	t.Logf("the third question was answered %s after A was killed (lease_ttl %s)", time.Since(killed).Round(100*time.Millisecond), rs.leaseTTL)

	// B answers the group's messages in order: a duplicate of an earlier
	// answer would have come by the barrier's.
	if _, err := rs.fake.Barrier(opsChat, alice, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, q := range []struct{ name, root string }{{"first", first}, {"second", second}, {"third", third}} {
		if n := botReplies(rs.fake, q.root); n != 1 {
			t.Errorf("the %s question got %d replies, want exactly 1:\n%s", q.name, n, threadText(rs.fake, q.root))
		}
	}
	if !logged(b, "this replica now holds the group's conversation", "main") {
		t.Errorf("B never took the group's conversation over:\n%s", b.log())
	}
	if !logged(b, "the group's conversation resumes its agent session", session) {
		t.Errorf("B's container was not started with A's session %s:\n%s", session, b.log())
	}
	// The script agent keeps the session it is asked to resume, and makes
	// up a new one otherwise: the same id means B's agent resumed A's.
	if got, err := st.GetSession(ctx, "main", ""); err != nil || got != session {
		t.Errorf("session after B answered = %q (%v), want A's %q resumed", got, err, session)
	}
	// The barrier's answer is recorded just after it is posted.
	testkit.WaitUntil(t, 10*time.Second, "every message is recorded as answered", func() bool {
		left, err := st.UnprocessedMessages(ctx)
		return err == nil && len(left) == 0
	})
}

// grepLog keeps the lines of log that mention any of words.
func grepLog(log string, words ...string) string {
	var out []string
	for line := range strings.SplitSeq(log, "\n") {
		if slices.ContainsFunc(words, func(w string) bool { return strings.Contains(line, w) }) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
