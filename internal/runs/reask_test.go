package runs_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"nanohost/internal/channels"
	"nanohost/internal/channels/console"
	"nanohost/internal/channels/report"
	"nanohost/internal/runlog"
	"nanohost/internal/runs"
	"nanohost/internal/runs/runstest"
	"nanohost/internal/store/storetest"
	"nanohost/internal/testkit"
)

// consoleService is a service telling its runs on a console writing to out.
func consoleService(t *testing.T, f *fixture, out *testkit.Buffer) *runs.Service {
	t.Helper()
	cfg := runstest.Config(t, f.st)
	cfg.Threads = &report.Threads{Channels: []channels.Channel{console.New(strings.NewReader(""), out)}, Life: t.Context(), Logger: quiet}
	cfg.GatePoll = 50 * time.Millisecond
	return runstest.New(t, cfg)
}

// A gate answered (by a tool writing to the store) with a text that names
// none of its choices is asked again, and the prompt on the console says
// why before the question. The reason is kept with the gate: after the
// host restarts, the resumed run's new prompt says it again, and the
// dashboard's list of the gate carries it.
func TestAnUnmatchedAnswerIsAskedAgainSayingWhyEvenAfterARestart(t *testing.T) {
	url := storetest.URL(t, t.TempDir())
	f := &fixture{t: t, st: openStore(t, url), url: url}
	out := &testkit.Buffer{}
	f.service = consoleService(t, f, out)
	ctx := context.Background()
	run, g := f.start(gateDOT)
	if ok, _, err := f.st.AnswerGate(ctx, run.ID, g.GateID, g.Nonce, 0, "maybe", "a tool"); !ok || err != nil {
		t.Fatalf("answer in the store: %v %v", ok, err)
	}
	const why = `❓ "maybe" matches none of the options ([A] Approve, [A] Abort). Ship it?`
	reask := func(what string) runs.Gate {
		t.Helper()
		var again runs.Gate
		testkit.WaitUntil(t, 10*time.Second, what, func() bool {
			st, err := f.service.Status(ctx, run.ID)
			if err != nil || len(st.Gates) == 0 || st.Gates[0].GateID != "review-1.1" {
				return false
			}
			again = st.Gates[0]
			return strings.Count(out.String(), why) >= 1
		})
		return again
	}
	first := reask("the gate is asked again, saying why")
	if first.Unmatched != "maybe" || first.Text != "Ship it?" {
		t.Errorf("re-asked gate: unmatched %q, question %q", first.Unmatched, first.Text)
	}

	f.service.Shutdown(10 * time.Second)
	before := strings.Count(out.String(), why)
	f.service = consoleService(t, f, out)
	if err := f.service.ResumeUnfinished(ctx); err != nil {
		t.Fatal(err)
	}
	var second runs.Gate
	testkit.WaitUntil(t, 10*time.Second, "the resumed run asks again, saying why again", func() bool {
		st, err := f.service.Status(ctx, run.ID)
		if err != nil || len(st.Gates) == 0 || st.Gates[0].Nonce == first.Nonce {
			return false
		}
		second = st.Gates[0]
		return strings.Count(out.String(), why) > before
	})
	stored, err := f.st.GetGate(ctx, run.ID, "review-1.1")
	if err != nil || stored.Unmatched != "maybe" || runlog.QuestionText(stored.Question()) != strings.TrimPrefix(why, "❓ ") {
		t.Errorf("the stored re-ask after the restart: %+v %v", stored, err)
	}
	if _, err := f.service.Answer(ctx, runs.GateAnswer{RunID: run.ID, GateID: second.GateID, Option: 1}, chat); err != nil {
		t.Fatal(err)
	}
	f.waitState(run.ID, runs.Succeeded)
	if !strings.Contains(f.nodes(run.ID), "ship") {
		t.Errorf("the run went %s, want ship", f.nodes(run.ID))
	}
}
