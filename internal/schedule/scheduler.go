package schedule

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"nanohost/internal/lease"
)

// Config is what a Scheduler needs.
type Config struct {
	Store Store
	Firer Firer
	// Leases claim each fire for one replica (the host's one keeper).
	Leases Leases
	// Owner names this replica in the fires recorded (default "local").
	Owner string
	// Loc is the zone cron and once are read in (default UTC).
	Loc *time.Location
	// Now is the clock (default time.Now): tests inject one and Wake the
	// scheduler after moving it.
	Now func() time.Time
	// Poll bounds how long the scheduler sleeps between looks at the
	// store (default 30s): a task another replica made, or one made here
	// while a long sleep was set, fires at most this late. Wake cuts it.
	Poll time.Duration
	// Late is how far past its due time a fire counts as missed, one the
	// host was down for (default 2m): catch_up decides those.
	Late time.Duration
	// Parallel bounds the fires in progress at once (default 8).
	Parallel int
	Logger   *slog.Logger
}

// Scheduler fires due tasks, each once per due time across the replicas
// sharing the store.
type Scheduler struct {
	cfg   Config
	log   *slog.Logger
	wake  chan struct{}
	looks chan chan []<-chan struct{} // Look's requests: the fires in progress, to wait for
	slots chan struct{}

	mu       sync.Mutex
	inFlight map[string]chan struct{} // task ids being fired here; each closed when its fire is over
	wg       sync.WaitGroup
}

// New returns a scheduler; Run starts it.
func New(cfg Config) (*Scheduler, error) {
	if cfg.Store == nil || cfg.Firer == nil || cfg.Leases == nil {
		return nil, errors.New("schedule: a store, a firer and leases are needed")
	}
	if cfg.Owner == "" {
		cfg.Owner = "local"
	}
	if cfg.Loc == nil {
		cfg.Loc = time.UTC
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 30 * time.Second
	}
	if cfg.Late <= 0 {
		cfg.Late = 2 * time.Minute
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = 8
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Scheduler{cfg: cfg, log: cfg.Logger, wake: make(chan struct{}, 1), looks: make(chan chan []<-chan struct{}),
		slots: make(chan struct{}, cfg.Parallel), inFlight: map[string]chan struct{}{}}, nil
}

// Wake makes the scheduler look for due tasks now (a task was made or
// changed, or a test moved the clock).
func (s *Scheduler) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Look makes the running scheduler look for due tasks now, as Wake does,
// and returns once it has looked and every fire in progress then (started
// by this look or before) is over and recorded. A test that moved the
// clock knows then that nothing (more) was due, rather than waiting for a
// fire that should not come.
func (s *Scheduler) Look(ctx context.Context) error {
	reply := make(chan []<-chan struct{}, 1)
	select {
	case s.looks <- reply:
	case <-ctx.Done():
		return ctx.Err()
	}
	var fires []<-chan struct{}
	select {
	case fires = <-reply:
	case <-ctx.Done():
		return ctx.Err()
	}
	for _, done := range fires {
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// inProgress are the fires in progress here, each closed once over.
func (s *Scheduler) inProgress() []<-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]<-chan struct{}, 0, len(s.inFlight))
	for _, done := range s.inFlight {
		out = append(out, done)
	}
	return out
}

// Run fires due tasks until ctx ends, then waits for the fires in
// progress (each sees ctx end).
func (s *Scheduler) Run(ctx context.Context) {
	defer s.wg.Wait()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		var reply chan []<-chan struct{}
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-s.wake:
		case reply = <-s.looks:
		}
		s.Tick(ctx)
		if reply != nil {
			reply <- s.inProgress()
		}
		timer.Reset(s.sleep(ctx))
	}
}

func (s *Scheduler) releaseClaim(ctx context.Context, id lease.ID) {
	if err := s.cfg.Leases.Release(context.WithoutCancel(ctx), id); err != nil {
		s.log.Warn("schedule: release a fire's claim", "fire", id.Key, "err", err)
	}
}

// Wait waits for the fires in progress (benchmarks, tests).
func (s *Scheduler) Wait() { s.wg.Wait() }

// sleep is how long to wait before the next look: until the earliest due
// task, at most Poll.
func (s *Scheduler) sleep(ctx context.Context) time.Duration {
	next, ok, err := s.cfg.Store.NextDue(ctx)
	if err != nil || !ok {
		return s.cfg.Poll
	}
	d := next.Sub(s.cfg.Now())
	if d <= 0 {
		// Still due: being fired (here, or by another replica that may
		// die holding its claim). Look again soon, not in a busy loop.
		return min(stillDue, s.cfg.Poll)
	}
	return min(max(d, 10*time.Millisecond), s.cfg.Poll)
}

// stillDue is how soon the scheduler looks again while the earliest task
// is due still: a fire in progress takes as long as its agent or its
// run's start, and one claimed by a replica that died waits for its
// lease to expire.
const stillDue = time.Second

// dueBatch bounds the tasks read per look; more are read on the next.
const dueBatch = 200

// Tick starts every due task this replica can claim, in the background.
func (s *Scheduler) Tick(ctx context.Context) {
	now := s.cfg.Now()
	due, err := s.cfg.Store.DueTasks(ctx, now, dueBatch)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("schedule: read due tasks; trying again", "err", err)
		}
		return
	}
	for _, t := range due {
		if !s.begin(t.ID) {
			continue
		}
		id := FireLease(t.ID, t.NextRun)
		taken, _, err := s.cfg.Leases.Take(ctx, id)
		if err != nil || !taken {
			if err != nil {
				s.log.Warn("schedule: claim a fire", "task", t.ID, "err", err)
			}
			s.end(t.ID)
			continue
		}
		// The task list was read before the claim: another replica may
		// have done this fire and let its claim go since. What is stored
		// now (its record is written before its claim is released) says.
		if fresh, err := s.cfg.Store.GetTask(ctx, t.ID); err != nil || fresh.Status != Active || !fresh.NextRun.Equal(t.NextRun) {
			s.releaseClaim(ctx, id)
			s.end(t.ID)
			continue
		}
		// Kept (renewed) while the fire is in progress; one lost goes on
		// here to its end — what it starts is keyed by the fire, so the
		// replica that took it over starts nothing twice.
		s.cfg.Leases.Keep(id, func(error) {})
		select {
		case s.slots <- struct{}{}:
		case <-ctx.Done():
			s.end(t.ID)
			return
		}
		s.wg.Go(func() {
			defer func() { <-s.slots; s.end(t.ID) }()
			s.fire(ctx, t, now)
		})
	}
}

func (s *Scheduler) begin(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.inFlight[id]; ok {
		return false
	}
	s.inFlight[id] = make(chan struct{})
	return true
}

func (s *Scheduler) end(id string) {
	s.mu.Lock()
	if done, ok := s.inFlight[id]; ok {
		close(done)
		delete(s.inFlight, id)
	}
	s.mu.Unlock()
}

// fire does one claimed fire and records it. A fire that fails is
// recorded with its error; the task goes on to its next due time.
func (s *Scheduler) fire(ctx context.Context, t Task, now time.Time) {
	log := s.log.With("task", t.ID, "due", t.NextRun)
	f := Fire{Task: t, Due: t.NextRun, Late: now.Sub(t.NextRun) > s.cfg.Late}
	spec, err := Parse(t.Type, t.Value, s.cfg.Loc)
	if err != nil {
		// Stored by an older host, or edited by hand: it cannot go on.
		s.finish(ctx, f, FireRecord{Started: now, Err: err.Error()}, time.Time{}, log)
		return
	}
	next, _ := spec.After(f.Due, now)
	if f.Late && t.CatchUp == CatchUpSkip {
		log.Info("schedule: a fire missed while the host was down is skipped (catch_up: skip)", "next", next)
		s.finish(ctx, f, FireRecord{Started: now, Skipped: true}, next, log)
		return
	}
	if f.Late {
		log.Info("schedule: a fire missed while the host was down runs now, once (catch_up: once)", "next", next)
	}
	started := s.cfg.Now()
	res, err := s.cfg.Firer.Fire(ctx, f)
	rec := FireRecord{Started: started, Duration: s.cfg.Now().Sub(started), RunID: res.RunID, Result: res.Text}
	if err != nil {
		if ctx.Err() != nil {
			return // stopping: the claim lapses and the fire is done again, idempotently
		}
		rec.Err = err.Error()
		log.Warn("schedule: fire failed; the task goes on to its next time", "err", err, "next", next)
	} else {
		log.Info("schedule: fired", "run", res.RunID, "next", next)
	}
	s.finish(ctx, f, rec, next, log)
}

func (s *Scheduler) finish(ctx context.Context, f Fire, rec FireRecord, next time.Time, log *slog.Logger) {
	bg := context.WithoutCancel(ctx)
	ok, err := s.cfg.Store.FinishFire(bg, f, rec, next, s.cfg.Owner)
	if err == nil {
		if rerr := s.cfg.Leases.Release(bg, FireLease(f.Task.ID, f.Due)); rerr != nil {
			log.Warn("schedule: release a fire's claim", "err", rerr)
		}
	}
	switch {
	case err != nil:
		log.Error("schedule: record a fire; it is done again (idempotently) when its claim lapses", "err", err)
	case !ok:
		log.Info("schedule: another replica recorded this fire first")
	}
}
