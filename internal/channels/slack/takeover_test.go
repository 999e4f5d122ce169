package slack_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"nanohost/internal/channels/eventscript"
	"nanohost/internal/channels/report"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runs"
)

// A replica that dies between posting a thread message and recording it
// leaves the message in Slack and the delivered watermark one short. The
// reporter that takes the thread over (another replica, or the same one
// restarted) looks for that one message before posting it, and adopts it:
// every message shows once, in order. Without Taken, the same takeover
// shows the message twice — what the lookup prevents.
func TestSlackTakenOverThreadShowsEachMessageOnce(t *testing.T) {
	for _, taken := range []bool{true, false} {
		name := map[bool]string{true: "taken", false: "not marked taken"}[taken]
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			events := eventscript.FiveStageRun("run-take", t0)
			first := h.startReporter(opsChat, "run-take", runs.VerbosityStandard)
			feed(first, events)
			h.closeReporter(first)
			root := h.runRoot(opsChat)
			thread := h.fake.Thread(opsChat, root.TS)
			var meta struct {
				Payload struct {
					Seq int64 `json:"seq"`
				} `json:"event_payload"`
			}
			if err := json.Unmarshal(thread[len(thread)-1].Metadata, &meta); err != nil || meta.Payload.Seq == 0 {
				t.Fatalf("the last thread message's metadata %s names no event (%v)", thread[len(thread)-1].Metadata, err)
			}
			looked := h.fake.Calls("conversations.replies")

			// The record stops just before the last post.
			next := h.startReporter(opsChat, "run-take", runs.VerbosityStandard, func(c *report.Config) {
				c.Resume = runs.Progress{RootID: root.TS, LastSeq: meta.Payload.Seq - 1}
				c.Taken = taken
				c.Events = func(_ context.Context, after int64) ([]engine.Event, error) {
					return slices.DeleteFunc(slices.Clone(events), func(e engine.Event) bool { return e.Seq <= after }), nil
				}
			})
			h.closeReporter(next)
			got := texts(h.fake.Thread(opsChat, root.TS))
			if !taken {
				if len(got) != len(standardThread)+1 {
					t.Errorf("without the lookup the thread has %d messages, want the last one twice (%d)", len(got), len(standardThread)+1)
				}
				return
			}
			if !slices.Equal(got, standardThread) {
				t.Errorf("thread:\n%s\nwant each message once:\n%s", strings.Join(got, "\n"), strings.Join(standardThread, "\n"))
			}
			if h.fake.Calls("conversations.replies") == looked {
				t.Error("the taken-over reporter did not look for the message in flight")
			}
			if p := next.Progress(); p.LastSeq != events[len(events)-1].Seq {
				t.Errorf("the new reporter's watermark %d, want the last event %d", p.LastSeq, events[len(events)-1].Seq)
			}
		})
	}
}
