package queue

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func TestFIFOWithinCapacity(t *testing.T) {
	q := New[int](3)
	for i := 1; i <= 3; i++ {
		if !q.TryPush(i) {
			t.Fatalf("push %d refused below capacity", i)
		}
	}
	if q.TryPush(4) {
		t.Fatal("a full queue took a fourth item")
	}
	ctx := context.Background()
	for want := 1; want <= 3; want++ {
		if got, err := q.Pop(ctx); err != nil || got != want {
			t.Fatalf("pop = %d, %v; want %d", got, err, want)
		}
	}
	if !q.TryPush(5) || q.Len() != 1 {
		t.Fatal("room is free again after pops")
	}
}

func TestPushWaitsForRoomAndPopWaitsForItems(t *testing.T) {
	q := New[string](1)
	ctx := context.Background()
	q.TryPush("a")
	pushed := make(chan error, 1)
	go func() { pushed <- q.Push(ctx, "b") }()
	select {
	case <-pushed:
		t.Fatal("Push returned while the queue was full")
	case <-time.After(20 * time.Millisecond):
	}
	if v, _ := q.Pop(ctx); v != "a" {
		t.Fatalf("pop %q", v)
	}
	if err := <-pushed; err != nil {
		t.Fatal(err)
	}
	if v, _ := q.Pop(ctx); v != "b" {
		t.Fatalf("pop %q, want the waiting push", v)
	}
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if _, err := q.Pop(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("pop of an empty queue: %v, want the context's end", err)
	}
}

func TestCloseDrainsThenRefuses(t *testing.T) {
	q := New[int](4)
	q.TryPush(1)
	q.TryPush(2)
	waiting := New[int](1)
	popped := make(chan error, 1)
	go func() { _, err := waiting.Pop(context.Background()); popped <- err }()
	q.Close()
	waiting.Close()
	if q.TryPush(3) {
		t.Error("a closed queue took an item")
	}
	if err := q.Push(context.Background(), 3); !errors.Is(err, ErrClosed) {
		t.Errorf("Push on a closed queue: %v", err)
	}
	if got := q.TakeAll(); len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Errorf("TakeAll after close = %v, want what was queued", got)
	}
	if _, err := q.Pop(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Pop of a closed, empty queue: %v", err)
	}
	if err := <-popped; !errors.Is(err, ErrClosed) {
		t.Errorf("a Pop waiting when the queue closed got %v", err)
	}
}

// Many producers and one consumer: nothing lost, nothing doubled, and the
// queue never holds more than its capacity.
func TestConcurrentProducersLoseNothing(t *testing.T) {
	q := New[int](8)
	const producers, each = 8, 500
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for i := range each {
				if err := q.Push(context.Background(), p*each+i); err != nil {
					t.Error(err)
				}
			}
		})
	}
	seen := make([]bool, producers*each)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for n := 0; n < producers*each; {
			<-q.Ready()
			for _, v := range q.TakeAll() {
				if seen[v] {
					t.Errorf("%d delivered twice", v)
				}
				seen[v] = true
				n++
			}
			if l := q.Len(); l > q.Cap() {
				t.Errorf("queue holds %d > capacity %d", l, q.Cap())
			}
		}
	}()
	wg.Wait()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("consumer stuck: a wake-up was lost")
	}
}
