package runs_test

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runs"
	"nanohost/internal/store"
	"nanohost/internal/store/storetest"
	"nanohost/internal/testkit"
)

// Two runs services sharing one PostgreSQL, as two host replicas do: what
// one is asked (an answer, a cancel) reaches the other, which drives the
// run, through the store's wakes (LISTEN/NOTIFY) — not through its poll,
// which these services only do once a minute.

// replicaPoll is the services' safety-net poll here: far longer than any
// wait in these tests, so only a wake can explain a quick reaction.
const replicaPoll = time.Minute

type replicas struct {
	url      string
	a, b     *runs.Service
	storeA   *store.Store
	observed *observer // what A's runs did
}

func newReplicas(t testing.TB) *replicas {
	t.Helper()
	u := storetest.PostgresURL(t)
	r := &replicas{url: u, observed: &observer{}}
	r.storeA = openStore(t, u)
	storeB := openStore(t, u)
	r.a = newService(t, r.storeA, serviceOptions{poll: replicaPoll, wakeups: r.storeA.Wakeups(quiet), observe: r.observed.add})
	r.b = newService(t, storeB, serviceOptions{poll: replicaPoll, wakeups: storeB.Wakeups(quiet)})
	return r
}

// startAtGate starts gateDOT on A and waits for its gate.
func (r *replicas) startAtGate(t testing.TB) (runs.Run, runs.Gate) {
	t.Helper()
	run, _, err := r.a.Start(context.Background(), runs.StartRequest{Group: "main", Chat: chat.Chat, Source: []byte(gateDOT)}, chat)
	if err != nil {
		t.Fatal(err)
	}
	var g runs.Gate
	testkit.WaitUntil(t, 10*time.Second, "run "+run.ID+" asks a gate", func() bool {
		st, err := r.b.Status(context.Background(), run.ID)
		if err != nil || len(st.Gates) == 0 {
			return false
		}
		g = st.Gates[0]
		return true
	})
	return run, g
}

// observer records when A's runs' events were stored.
type observer struct {
	mu     sync.Mutex
	events []observed
	wake   chan struct{}
}

type observed struct {
	run  string
	typ  engine.EventType
	when time.Time
}

func (o *observer) add(run runs.Run, e engine.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, observed{run.ID, e.Type, time.Now()})
	if o.wake != nil {
		select {
		case o.wake <- struct{}{}:
		default:
		}
	}
}

// await returns when run's first event of type typ was stored.
func (o *observer) await(t testing.TB, run string, typ engine.EventType, within time.Duration) time.Time {
	t.Helper()
	o.mu.Lock()
	if o.wake == nil {
		o.wake = make(chan struct{}, 1)
	}
	wake := o.wake
	o.mu.Unlock()
	deadline := time.After(within)
	for {
		o.mu.Lock()
		i := slices.IndexFunc(o.events, func(e observed) bool { return e.run == run && e.typ == typ })
		var at time.Time
		if i >= 0 {
			at = o.events[i].when
		}
		o.mu.Unlock()
		if i >= 0 {
			return at
		}
		select {
		case <-wake:
		case <-deadline:
			t.Fatalf("run %s: no %s within %s", run, typ, within)
		}
	}
}

// A gate of a run A drives, answered through B: A takes the answer at
// once. The latency is logged (BenchmarkAnswerElsewhereWakesDriver
// measures it).
func TestAnswerThroughAnotherReplicaWakesTheDriver(t *testing.T) {
	r := newReplicas(t)
	run, g := r.startAtGate(t)
	asked := time.Now()
	if _, err := r.b.Answer(context.Background(), runs.GateAnswer{RunID: run.ID, GateID: g.GateID, Option: 1}, web); err != nil {
		t.Fatal(err)
	}
	woke := r.observed.await(t, run.ID, engine.EventInterviewCompleted, 10*time.Second)
	t.Logf("answer through B → A's run went on after %s", woke.Sub(asked))
	done := r.observed.await(t, run.ID, engine.EventPipelineCompleted, 10*time.Second)
	if st, err := r.b.Status(context.Background(), run.ID); err != nil || !slices.Contains(st.Completed, "ship") {
		t.Errorf("after the answer (%s): %+v %v; want ship completed", done.Sub(asked), st.Completed, err)
	}
}

// A cancel asked through B stops the run A drives, as cancelled by whoever
// asked, its gate withdrawn; a second cancel is refused as too late.
func TestCancelThroughAnotherReplicaStopsTheRun(t *testing.T) {
	r := newReplicas(t)
	ctx := context.Background()
	run, g := r.startAtGate(t)
	if err := r.b.Cancel(ctx, run.ID, web); err != nil {
		t.Fatal(err)
	}
	r.observed.await(t, run.ID, engine.EventPipelineCancelled, 10*time.Second)
	got := waitRunState(t, r.storeA, run.ID, runs.Cancelled)
	if got.FailureReason != "cancelled by web:ana" {
		t.Errorf("reason %q, want cancelled by web:ana", got.FailureReason)
	}
	if gate, _ := r.storeA.GetGate(ctx, run.ID, g.GateID); gate.Status != runs.GateWithdrawn {
		t.Errorf("gate of the cancelled run: %s, want withdrawn", gate.Status)
	}
}

// A listener whose connection is cut reconnects, and an answer given after
// the cut still wakes the driver at once.
func TestWakesSurviveALostConnection(t *testing.T) {
	r := newReplicas(t)
	run, g := r.startAtGate(t)
	killed := killListeners(t, r.url)
	// The listeners notice and reconnect (100 ms backoff): new sessions
	// listen, which the database shows but does not announce.
	testkit.WaitUntil(t, 10*time.Second, "both replicas listen again on new connections", func() bool {
		return len(slices.DeleteFunc(listenerPIDs(t, r.url), func(pid int) bool { return slices.Contains(killed, pid) })) == 2
	})
	asked := time.Now()
	if _, err := r.b.Answer(context.Background(), runs.GateAnswer{RunID: run.ID, GateID: g.GateID, Option: 1}, web); err != nil {
		t.Fatal(err)
	}
	woke := r.observed.await(t, run.ID, engine.EventInterviewCompleted, 10*time.Second)
	t.Logf("after a reconnect, answer through B → A's run went on after %s", woke.Sub(asked))
}

// listeners are the sessions listening on the channel of the schema of
// the database at dsn.
const listeners = `FROM pg_stat_activity WHERE query = 'LISTEN "nanohost.' || $1 || '"'`

// listenerPIDs are the server processes of the listeners of the database
// at dsn (its schema's channel).
func listenerPIDs(t testing.TB, dsn string) []int {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), `SELECT pid `+listeners, u.Query().Get("search_path"))
	if err != nil {
		t.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatal(err)
	}
	return pids
}

// killListeners ends the server side of the listeners of the database at
// dsn (its schema's channel) and returns their pids.
func killListeners(t testing.TB, dsn string) []int {
	t.Helper()
	// The listeners connect in the background: wait until both listen.
	var pids []int
	testkit.WaitUntil(t, 10*time.Second, "the 2 replicas listen on the database", func() bool {
		pids = listenerPIDs(t, dsn)
		return len(pids) == 2
	})
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, pid := range pids {
		if _, err := conn.Exec(context.Background(), `SELECT pg_terminate_backend($1)`, pid); err != nil {
			t.Fatalf("end listener %d: %v", pid, err)
		}
	}
	return pids
}

func waitRunState(t testing.TB, st *store.Store, runID string, want runs.State) runs.Run {
	t.Helper()
	var r runs.Run
	testkit.WaitUntil(t, 10*time.Second, fmt.Sprintf("run %s is %s", runID, want), func() bool {
		var err error
		r, err = st.GetRun(context.Background(), runID)
		return err == nil && r.Status == want
	})
	return r
}

// BenchmarkAnswerElsewhereWakesDriver measures how long after an answer
// given through replica B the run replica A drives goes on (its
// InterviewCompleted event stored): the store write, the notification,
// A's re-read of the gate and the engine's next step. Each iteration is
// one run at its gate; only the answer's way is timed.
//
//	go test ./internal/runs -run '^$' -bench AnswerElsewhere -benchtime 200x
func BenchmarkAnswerElsewhereWakesDriver(b *testing.B) {
	r := newReplicas(b)
	var lat []time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		run, g := r.startAtGate(b)
		b.StartTimer()
		asked := time.Now()
		if _, err := r.b.Answer(context.Background(), runs.GateAnswer{RunID: run.ID, GateID: g.GateID, Option: 1}, web); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, r.observed.await(b, run.ID, engine.EventInterviewCompleted, 10*time.Second).Sub(asked))
		b.StopTimer()
		r.observed.await(b, run.ID, engine.EventPipelineCompleted, 10*time.Second)
		b.StartTimer()
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*95/100].Microseconds())/1000, "p95-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
}
