package host

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"nanohost/internal/channels/slacktest"
	"nanohost/internal/testkit"
)

// A host that died after posting the agent's answer but before recording
// it leaves the message unanswered in the store; whoever takes it next —
// the host started again, or another replica taking the group over —
// asks the agent again but finds the answer already in the thread (by its
// key) and does not post it twice.
func TestAnswerPostedBeforeACrashIsNotPostedAgain(t *testing.T) {
	fake := groupsWorkspace(t)
	dir := t.TempDir()
	th := launch(t, groupsSetup(fake, dir))
	q, err := fake.Mention(opsChat, alice, "question")
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, 10*time.Second, "the question is answered and recorded", func() bool {
		left, err := th.store.UnprocessedMessages(context.Background())
		return err == nil && len(left) == 0 && botPosts(fake, q) == 1
	})
	url := th.cfg.StoreURL()
	th.stop()
	forgetProcessed(t, url, q) // as if the host died between the post and the record

	again := launch(t, groupsSetup(fake, dir))
	testkit.WaitUntil(t, 10*time.Second, "the message is taken again and recorded", func() bool {
		left, err := again.store.UnprocessedMessages(context.Background())
		return err == nil && len(left) == 0
	})
	if n := len(again.agents.prompts("chat")); n != 1 {
		t.Fatalf("the agent was asked %d times after the restart, want once (the message was left unanswered)", n)
	}
	if _, err := fake.Barrier(opsChat, alice, 10*time.Second); err != nil { // a second post would have come by now
		t.Fatal(err)
	}
	if n := botPosts(fake, q); n != 1 {
		t.Errorf("the question has %d answers in its thread, want 1", n)
	}
}

// botPosts counts the bot's messages in a thread of the ops channel.
func botPosts(fake *slacktest.Server, root string) int {
	n := 0
	for _, m := range fake.Thread(opsChat, root) {
		if m.FromBot() {
			n++
		}
	}
	return n
}

// forgetProcessed marks a stored message unanswered, straight in the
// database (SQLite file or PostgreSQL URL).
func forgetProcessed(t *testing.T, url, msgID string) {
	t.Helper()
	driver := "sqlite3"
	if strings.HasPrefix(url, "postgres") {
		driver = "pgx"
	}
	db, err := sql.Open(driver, url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	res, err := db.Exec(`UPDATE messages SET processed_at = NULL WHERE channel_msg_id = '` + msgID + `'`)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("marked %d messages unanswered, want 1", n)
	}
}
