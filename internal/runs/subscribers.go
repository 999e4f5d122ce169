package runs

import "sync"

// subscribers wakes the event streams of runs (the dashboard's) when an
// event of theirs is stored or they end. The zero value is ready to use.
type subscribers struct {
	mu   sync.Mutex
	subs map[string]map[chan struct{}]struct{} // run id → its streams' channels
}

func (w *subscribers) subscribe(runID string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1) // one pending wake is enough: a stream reads everything new
	w.mu.Lock()
	if w.subs == nil {
		w.subs = map[string]map[chan struct{}]struct{}{}
	}
	if w.subs[runID] == nil {
		w.subs[runID] = map[chan struct{}]struct{}{}
	}
	w.subs[runID][ch] = struct{}{}
	w.mu.Unlock()
	return ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.subs[runID], ch)
		if len(w.subs[runID]) == 0 {
			delete(w.subs, runID)
		}
	}
}

// wake tells the run's streams something new is stored (never blocks).
func (w *subscribers) wake(runID string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ch := range w.subs[runID] {
		poke(ch)
	}
}

// wakeAll wakes every stream (wakes may have been missed).
func (w *subscribers) wakeAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, chs := range w.subs {
		for ch := range chs {
			poke(ch)
		}
	}
}

// poke wakes whoever waits on ch, unless a wake is pending already.
func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
