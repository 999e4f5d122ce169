package schedule_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"nanohost/internal/lease"
	"nanohost/internal/schedule"
	"nanohost/internal/store"
	"nanohost/internal/store/storetest"
	"nanohost/internal/testkit"
)

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

// fireLog counts the fires each (task, due) got, by replica.
type fireLog struct {
	mu    sync.Mutex
	fires map[string][]string
}

func (l *fireLog) firer(replica string) schedule.Firer {
	return schedule.FirerFunc(func(_ context.Context, f schedule.Fire) (schedule.Result, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		key := fmt.Sprintf("%s@%d", f.Task.ID, f.Due.Unix())
		l.fires[key] = append(l.fires[key], replica)
		return schedule.Result{RunID: "run-" + key}, nil
	})
}

// Two schedulers (two replicas) on one PostgreSQL store: every due fire is
// done by exactly one of them; a fire claimed by a replica that died right
// after claiming is done by the other once the claim expires — once — and
// the dead one's late record changes nothing.
func TestFireIsDoneOnceByOneOfTwoSchedulers(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, storetest.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	start := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	const n = 40
	for i := range n {
		if err := st.CreateTask(ctx, schedule.Task{ID: fmt.Sprintf("t%02d", i), Group: "main", Chat: "console", Prompt: "p",
			Type: schedule.Interval, Value: "3600000", Status: schedule.Active, NextRun: start}); err != nil {
			t.Fatal(err)
		}
	}
	now := start.Add(time.Second)
	clock := func() time.Time { return now }
	quiet := slog.New(slog.DiscardHandler)
	log := &fireLog{fires: map[string][]string{}}
	ttl := 2 * time.Second
	newScheduler := func(id string) (*schedule.Scheduler, *lease.Keeper) {
		k := lease.NewKeeper(st, id, ttl, quiet)
		s, err := schedule.New(schedule.Config{Store: st, Leases: k, Firer: log.firer(id), Owner: id, Now: clock, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		return s, k
	}
	a, _ := newScheduler("a")
	b, _ := newScheduler("b")
	var wg sync.WaitGroup
	for _, s := range []*schedule.Scheduler{a, b} {
		wg.Go(func() { s.Tick(ctx); s.Wait() })
	}
	wg.Wait()
	if len(log.fires) != n {
		t.Fatalf("%d fires done, want %d", len(log.fires), n)
	}
	for key, by := range log.fires {
		if len(by) != 1 {
			t.Errorf("fire %s done %d times (by %v)", key, len(by), by)
		}
	}

	// Replica c claims the next fire of t00 and dies before doing it.
	now = start.Add(time.Hour + time.Second)
	task, err := st.GetTask(ctx, "t00")
	if err != nil || !task.NextRun.Equal(start.Add(time.Hour)) {
		t.Fatalf("t00 after its fire: %+v %v", task, err)
	}
	dead := lease.NewKeeper(st, "c", ttl, quiet)
	if taken, _, err := dead.Take(ctx, schedule.FireLease("t00", task.NextRun)); err != nil || !taken {
		t.Fatalf("c claims: %v %v", taken, err)
	}
	b.Tick(ctx)
	b.Wait()
	key := fmt.Sprintf("t00@%d", task.NextRun.Unix())
	if len(log.fires[key]) != 0 {
		t.Fatalf("b did a fire c holds: %v", log.fires[key])
	}
	// c's claim lapses on the database's clock, which says nothing when.
	testkit.WaitUntil(t, 3*ttl, "b takes over the fire c claimed and left", func() bool {
		b.Tick(ctx)
		b.Wait()
		return len(log.fires[key]) > 0
	})
	if by := log.fires[key]; len(by) != 1 || by[0] != "b" {
		t.Fatalf("the fire c claimed and left: done by %v, want once by b", by)
	}
	// c comes back and records the fire it claimed: nothing changes.
	moved, err := st.FinishFire(ctx, schedule.Fire{Task: task, Due: task.NextRun}, schedule.FireRecord{Started: now, RunID: "ghost"}, task.NextRun.Add(time.Hour), "c")
	if err != nil || moved {
		t.Errorf("a late record by the dead replica moved the task: %v %v", moved, err)
	}
	if after, _ := st.GetTask(ctx, "t00"); after.LastRunID == "ghost" || !after.NextRun.Equal(start.Add(2*time.Hour)) {
		t.Errorf("t00 after the takeover: %+v", after)
	}
	fires, err := st.TaskFires(ctx, "t00", 10)
	if err != nil || len(fires) != 2 {
		t.Errorf("t00's history: %+v %v", fires, err)
	}
}
