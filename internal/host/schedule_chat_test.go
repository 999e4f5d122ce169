package host

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"nanohost/internal/config"
	"nanohost/internal/schedule"
	"nanohost/internal/testkit"
)

var taskIDIn = regexp.MustCompile(`Scheduled (task-[0-9a-f]+)`)

// /schedule in chat — on the console and in Slack — creates, lists,
// pauses, resumes and cancels tasks, saying in words when each fires
// next; who may not start runs in a chat may not schedule there either.
func TestScheduleCommandsInChat(t *testing.T) {
	t.Run("console", func(t *testing.T) {
		clock := newFakeClock(t0)
		th := launch(t, hostSetup{answer: succeed, now: clock.Now, configure: func(c *config.Config) { c.Timezone = "Europe/Berlin" }})
		if err := os.WriteFile(filepath.Join(th.GroupDir("main"), "deploy.dot"), []byte(inputsDeployDOT), 0o644); err != nil {
			t.Fatal(err)
		}
		seen := 0
		// say types line and waits until the console has said every one of
		// wants (a list's lines may reach the screen one write at a time).
		say := func(line string, wants ...string) string {
			t.Helper()
			if _, err := io.WriteString(th.typing, line+"\n"); err != nil {
				t.Fatal(err)
			}
			var out string
			testkit.WaitUntil(t, 10*time.Second, "the console says "+strings.Join(wants, " and "), func() bool {
				out = th.screen.Text()[seen:]
				for _, want := range wants {
					if !strings.Contains(out, want) {
						return false
					}
				}
				return true
			})
			seen = len(th.screen.Text())
			return out
		}
		out := say("/schedule every 30m check the build", "Scheduled task-")
		id := taskIDIn.FindStringSubmatch(out)[1]
		if !strings.Contains(out, "next: Mon 30 Nov 09:30 Europe/Berlin") {
			t.Errorf("the answer says when it next fires in words: %q", out)
		}
		if task := th.task(t, id); task.Prompt != "check the build" || task.Type != schedule.Interval || task.ContextMode != schedule.Group {
			t.Errorf("the task: %+v", task)
		}
		out = say("/schedule at 2026-12-01 09:00 pipeline deploy repo=acme/shop ref=main", "Scheduled task-")
		pid := taskIDIn.FindStringSubmatch(out)[1]
		if !strings.Contains(out, "pipeline deploy ref=main repo=acme/shop") || !strings.Contains(out, "next: Tue 1 Dec 09:00 Europe/Berlin") {
			t.Errorf("a pipeline task: %q", out)
		}
		if task := th.task(t, pid); task.Inputs["repo"] != "acme/shop" || !task.NextRun.Equal(time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)) {
			t.Errorf("the pipeline task: %+v", task)
		}
		out = say("/schedule list", "pipeline deploy ref=main repo=acme/shop — at 2026-12-01 09:00 — next: Tue 1 Dec 09:00 Europe/Berlin", `"check the build" — every 30m`)
		if !strings.Contains(out, "Scheduled tasks:") || !strings.Contains(out, id) || !strings.Contains(out, pid) {
			t.Errorf("list: %q", out)
		}
		say("/schedule pause "+id, "Paused "+id)
		if th.task(t, id).Status != schedule.Paused {
			t.Errorf("not paused")
		}
		say("/schedule list", `"check the build" — every 30m (paused)`)
		say("/schedule resume "+id, "Resumed "+id)
		say("/schedule cancel "+id, "Cancelled "+id)
		if _, err := th.store.GetTask(context.Background(), id); err == nil {
			t.Errorf("a cancelled task is still stored")
		}
		say("/schedule every 10s too often", "shorter than")
		say("/schedule pause task-nope", "no task task-nope")
		say("/schedule 0 9 * *", "is not a schedule")
	})

	t.Run("slack", func(t *testing.T) {
		fake := groupsWorkspace(t)
		fake.AddUser(mallory, "Mallory")
		th := launch(t, groupsSetup(fake, ""))
		fake.SlashCommandNamed("/schedule", opsChat, alice, "0 9 * * 1-5 summarise the open incidents")
		waitBot(t, fake, opsChat, "Scheduled task-")
		var id string
		for _, m := range fake.BotMessages(opsChat) {
			if sub := taskIDIn.FindStringSubmatch(m.Text); sub != nil {
				id = sub[1]
			}
		}
		if task := th.task(t, id); task.Chat != opsChat || task.CreatedBy != alice || task.Group != "main" {
			t.Errorf("the task: %+v", task)
		}
		fake.SlashCommandNamed("/schedule", opsChat, mallory, "every 1h spam")
		fake.SlashCommandNamed("/schedule", opsChat, mallory, "cancel "+id)
		if !fake.WaitFor(10*time.Second, func() bool { return len(fake.Ephemerals(opsChat, mallory)) >= 2 }) {
			t.Fatalf("mallory was not told no: %v", fake.Ephemerals(opsChat, mallory))
		}
		for _, e := range fake.Ephemerals(opsChat, mallory) {
			if !strings.HasPrefix(e.Text, "✋") {
				t.Errorf("mallory was told %q", e.Text)
			}
		}
		if list, _ := th.store.ListTasks(context.Background(), ""); len(list) != 1 {
			t.Errorf("%d tasks after mallory's commands, want alice's one", len(list))
		}
		fake.SlashCommandNamed("/schedule", opsChat, alice, "list")
		waitBot(t, fake, opsChat, "Scheduled tasks:")
		fake.SlashCommandNamed("/schedule", opsChat, alice, "pause "+id)
		waitBot(t, fake, opsChat, "Paused "+id)
	})
}
