package container

import (
	"context"
	"sync"
	"testing"
	"time"
)

// waitQueued blocks until n acquirers are queued.
func waitQueued(t *testing.T, s *slots, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for s.waiting() < n {
		if time.Now().After(deadline) {
			t.Fatalf("only %d waiters queued, want %d", s.waiting(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestSlotsAreSharedRoundRobinAcrossRuns(t *testing.T) {
	s := newSlots(1)
	hold, _ := s.tryAcquire("busy")

	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	enqueue := func(run string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rel, err := s.acquire(context.Background(), run)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, run)
			mu.Unlock()
			rel()
		}()
	}
	// Run A queues three requests before run B queues one: FIFO would make
	// B wait for all of A; round-robin serves B second.
	for i := range 3 {
		enqueue("A")
		waitQueued(t, s, i+1)
	}
	enqueue("B")
	waitQueued(t, s, 4)
	hold()
	wg.Wait()
	want := []string{"A", "B", "A", "A"}
	if len(order) != len(want) {
		t.Fatalf("order = %v, want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("order = %v, want %v", order, want)
		}
	}
}

func TestSlotsCapAndCancel(t *testing.T) {
	s := newSlots(2)
	r1, _ := s.acquire(context.Background(), "A")
	r2, _ := s.acquire(context.Background(), "A")
	if _, ok := s.tryAcquire("B"); ok {
		t.Fatal("a third slot was handed out with a cap of 2")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := s.acquire(ctx, "B"); err == nil {
		t.Fatal("acquire should fail when its context ends before a slot frees")
	}
	if s.waiting() != 0 {
		t.Fatalf("a cancelled waiter stayed queued")
	}
	r1()
	r1() // releasing twice must not create a slot
	r3, ok := s.tryAcquire("B")
	if !ok {
		t.Fatal("a released slot was not reusable")
	}
	if _, ok := s.tryAcquire("C"); ok {
		t.Fatal("double release created an extra slot")
	}
	r2()
	r3()
}
