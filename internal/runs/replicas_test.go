package runs_test

import (
	"context"
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
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if st, err := r.b.Status(context.Background(), run.ID); err == nil && len(st.Gates) > 0 {
			return run, st.Gates[0]
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("run %s asked no gate", run.ID)
	return runs.Run{}, runs.Gate{}
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
	killListeners(t, r.url)
	time.Sleep(300 * time.Millisecond) // the listeners notice and reconnect (100 ms backoff)
	asked := time.Now()
	if _, err := r.b.Answer(context.Background(), runs.GateAnswer{RunID: run.ID, GateID: g.GateID, Option: 1}, web); err != nil {
		t.Fatal(err)
	}
	woke := r.observed.await(t, run.ID, engine.EventInterviewCompleted, 10*time.Second)
	t.Logf("after a reconnect, answer through B → A's run went on after %s", woke.Sub(asked))
}

// killListeners ends the server side of the listeners of the database at
// dsn (its schema's channel).
func killListeners(t testing.TB, dsn string) {
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
	schema := u.Query().Get("search_path")
	// The listeners connect in the background: wait until both listen.
	const listeners = `FROM pg_stat_activity WHERE query = 'LISTEN "nanohost.' || $1 || '"'`
	deadline := time.Now().Add(10 * time.Second)
	for n := 0; n < 2; {
		if err := conn.QueryRow(context.Background(), `SELECT count(*) `+listeners, schema).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d listeners on the database, want the 2 replicas'", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	var n int
	if err := conn.QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) `+listeners, schema).Scan(&n); err != nil || n != 2 {
		t.Fatalf("ended %d listeners (%v), want the 2 replicas'", n, err)
	}
}

func waitRunState(t testing.TB, st *store.Store, runID string, want runs.State) runs.Run {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := st.GetRun(context.Background(), runID)
		if err == nil && r.Status == want {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is %s (%v), want %s", runID, r.Status, err, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
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
