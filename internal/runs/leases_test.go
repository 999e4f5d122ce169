package runs_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runs"
	"nanohost/internal/store"
	"nanohost/internal/store/storetest"
	"nanohost/internal/testkit"
)

// leaseTTL is short here: a takeover waits for a lease to run out.
const leaseTTL = 2 * time.Second

// leasedReplica is a runs service that is one of several replicas sharing
// the PostgreSQL database at url.
func leasedReplica(t *testing.T, url, id string, observe func(runs.Run, engine.Event)) (*runs.Service, *store.Store) {
	t.Helper()
	st := openStore(t, url)
	return newService(t, st, serviceOptions{poll: 100 * time.Millisecond, wakeups: st.Wakeups(quiet), observe: observe,
		replica: id, leaseTTL: leaseTTL}), st
}

// startAtGateOn starts gateDOT on svc and waits for its gate.
func startAtGateOn(t *testing.T, svc *runs.Service, st *store.Store) (runs.Run, runs.Gate) {
	t.Helper()
	run, _, err := svc.Start(context.Background(), runs.StartRequest{Group: "main", Chat: chat.Chat, Source: []byte(gateDOT)}, chat)
	if err != nil {
		t.Fatal(err)
	}
	return run, awaitGate(t, st, run.ID)
}

// awaitGate waits until run has an open gate and returns it.
func awaitGate(t *testing.T, st *store.Store, runID string) runs.Gate {
	t.Helper()
	return awaitGateWhere(t, st, runID, func(runs.Gate) bool { return true })
}

// awaitGateWhere waits until run has an open gate for which ok holds.
func awaitGateWhere(t *testing.T, st *store.Store, runID string, ok func(runs.Gate) bool) runs.Gate {
	t.Helper()
	var open runs.Gate
	testkit.WaitUntil(t, 10*time.Second, "run "+runID+" asks a gate", func() bool {
		gates, _ := st.RunGates(context.Background(), runID)
		for _, g := range gates {
			if g.Status == runs.GateOpen && ok(g) {
				open = g
				return true
			}
		}
		return false
	})
	return open
}

// A replica that stops lets its runs go: another replica claims them at
// once, resumes them from their journals in the store (it has none of the
// first one's files), asks the gate again and drives the run to its end.
// Until then only the replica that started the run, holding its lease,
// drove it.
func TestReplicaStoppingHandsItsRunsOver(t *testing.T) {
	url := storetest.PostgresURL(t)
	ctx := context.Background()
	a, stA := leasedReplica(t, url, "A", nil)
	run, first := startAtGateOn(t, a, stA)
	if got, _ := stA.GetRun(ctx, run.ID); got.Owner != "A" {
		t.Fatalf("the run's owner is %q, want A, which started it", got.Owner)
	}
	b, stB := leasedReplica(t, url, "B", nil)
	if err := b.ResumeUnfinished(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(leaseTTL / 2)
	if b.Active() != 0 {
		t.Fatalf("B drives %d runs while A holds their lease", b.Active())
	}

	stopped := time.Now()
	a.Shutdown(10 * time.Second)
	// B runs on another machine: A's run directory is not there. The
	// run's journal is in the store.
	if err := os.RemoveAll(run.LogsRoot); err != nil {
		t.Fatal(err)
	}
	again := awaitGateWhere(t, stB, run.ID, func(g runs.Gate) bool { return g.Nonce != first.Nonce })
	t.Logf("B asked the gate again %s after A stopped", time.Since(stopped).Round(time.Millisecond))
	if time.Since(stopped) > leaseTTL {
		t.Errorf("B took %s to take over a run A let go; it should not wait for the lease to expire", time.Since(stopped))
	}
	if got, _ := stB.GetRun(ctx, run.ID); got.Owner != "B" {
		t.Errorf("the run's owner is %q, want B", got.Owner)
	}
	if _, err := b.Answer(ctx, runs.GateAnswer{RunID: run.ID, GateID: again.GateID, Option: 1}, web); err != nil {
		t.Fatal(err)
	}
	done := waitRunState(t, stB, run.ID, runs.Succeeded)
	if done.Owner != "" {
		t.Errorf("a finished run still has an owner: %q", done.Owner)
	}
}

// A replica whose lease was taken over (it could not renew in time: a
// pause, a network partition) stops driving the run at its next renewal
// and writes nothing more for it: no event, no state, its gate left to
// the new owner.
func TestReplicaThatLostItsLeaseWritesNothingMore(t *testing.T) {
	url := storetest.PostgresURL(t)
	ctx := context.Background()
	a, stA := leasedReplica(t, url, "A", nil)
	run, gate := startAtGateOn(t, a, stA)
	before, _ := stA.GetRun(ctx, run.ID)

	// Replica B took the lease over (as if A had missed its renewals).
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `UPDATE leases SET owner = 'B' WHERE kind = 'run' AND key = $1`, run.ID); err != nil {
		t.Fatal(err)
	}
	testkit.WaitUntil(t, leaseTTL, "A stops driving the run B took the lease of", func() bool { return a.Active() == 0 })
	a.Shutdown(10 * time.Second) // what A still did in the background is over: anything it would write, written
	after, _ := stA.GetRun(ctx, run.ID)
	if after.LastSeq != before.LastSeq || after.Status != before.Status {
		t.Errorf("A wrote after losing the lease: seq %d → %d, status %s → %s", before.LastSeq, after.LastSeq, before.Status, after.Status)
	}
	if g, _ := stA.GetGate(ctx, run.ID, gate.GateID); g.Status != runs.GateOpen || g.Nonce != gate.Nonce {
		t.Errorf("A settled the gate after losing the lease: %s (nonce %s → %s)", g.Status, gate.Nonce, g.Nonce)
	}
	if got, _ := stA.GetRun(ctx, run.ID); got.Owner != "B" {
		t.Errorf("owner %q, want B", got.Owner)
	}
}

// The files of every stage a replica runs are kept in the store where the
// dashboard looks for them — after a loop restart, under the restart's
// stage directory.
func TestStageFilesAreKeptInTheStore(t *testing.T) {
	url := storetest.PostgresURL(t)
	ctx := context.Background()
	st := openStore(t, url)
	a := newService(t, st, serviceOptions{replica: "A", leaseTTL: leaseTTL, runtime: scriptRuntime{}})
	const restarting = `digraph R {
  graph [max_restarts=1]
  start [shape=Mdiamond]
  work  [prompt="do the work"]
  exit  [shape=Msquare]
  start -> work
  work -> work [loop_restart=true, condition="context.graph.max_restarts=1"]
  work -> exit
}`
	run, _, err := a.Start(ctx, runs.StartRequest{Group: "main", Chat: chat.Chat, Source: []byte(restarting)}, chat)
	if err != nil {
		t.Fatal(err)
	}
	var done runs.Run
	testkit.WaitUntil(t, 20*time.Second, "run "+run.ID+" ends", func() bool {
		done, _ = st.GetRun(ctx, run.ID)
		return done.Status.Finished()
	})
	for _, path := range []string{"work/prompt.md", "restart-1/work/prompt.md"} {
		data, _, err := st.RunFile(ctx, run.ID, path, 1<<20)
		if err != nil || !strings.Contains(string(data), "do the work") {
			t.Errorf("%s in the store: %q, %v (run %s: %s)", path, data, err, done.Status, done.FailureReason)
		}
	}
}
