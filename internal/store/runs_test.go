package store

import (
	"context"
	"errors"
	"fmt"
	"nanohost/internal/runs"
	"strings"
	"testing"
	"time"

	"nanohost/internal/pipeline/engine"
)

func TestCreateRunDefaultsAndGet(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		in := runs.Run{ID: "r1", GroupFolder: "main", ChatID: "C1", SourceDOT: testDOT, FileName: "feature.dot",
			Goal: "Add RSI", LogsRoot: "/data/pipelines/r1", StartedBy: "U42"}
		if err := s.CreateRun(ctx, in); err != nil {
			t.Fatal(err)
		}
		r, err := s.GetRun(ctx, "r1")
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != runs.Queued || r.Verbosity != "standard" {
			t.Errorf("defaults: status %q verbosity %q, want queued/standard", r.Status, r.Verbosity)
		}
		if r.SourceDOT != testDOT || r.FileName != "feature.dot" || r.Goal != "Add RSI" ||
			r.LogsRoot != in.LogsRoot || r.StartedBy != "U42" {
			t.Errorf("fields not stored: %+v", r)
		}
		if r.CreatedAt.IsZero() || !r.StartedAt.IsZero() || !r.FinishedAt.IsZero() {
			t.Errorf("times: created %v started %v finished %v; want created only", r.CreatedAt, r.StartedAt, r.FinishedAt)
		}
	})
}

func TestCreateRunRejectsBadInput(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		createTestRun(t, s, "dup")
		for name, tc := range map[string]struct {
			run  runs.Run
			want string
		}{
			"missing fields": {runs.Run{ID: "x"}, "missing GroupFolder, ChatID, SourceDOT"},
			"bad verbosity":  {runs.Run{ID: "x", GroupFolder: "g", ChatID: "c", SourceDOT: testDOT, Verbosity: "loud"}, "want minimal, standard or verbose"},
			"bad status":     {runs.Run{ID: "x", GroupFolder: "g", ChatID: "c", SourceDOT: testDOT, Status: "done"}, "unknown run state"},
			"duplicate id":   {runs.Run{ID: "dup", GroupFolder: "g", ChatID: "c", SourceDOT: testDOT}, "already exists"},
		} {
			err := s.CreateRun(ctx, tc.run)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %v, want error containing %q", name, err, tc.want)
			}
		}
		if err := s.CreateRun(ctx, runs.Run{ID: "dup", GroupFolder: "g", ChatID: "c", SourceDOT: testDOT}); !errors.Is(err, ErrExists) {
			t.Errorf("duplicate: %v, want ErrExists", err)
		}
	})
}

func TestRunLifecycle(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		createTestRun(t, s, "r")

		if err := s.UpdateRunStatus(ctx, "r", runs.Running); err != nil {
			t.Fatal(err)
		}
		r, _ := s.GetRun(ctx, "r")
		started := r.StartedAt
		if r.Status != runs.Running || started.IsZero() {
			t.Fatalf("after running: %s started %v", r.Status, started)
		}
		// Waiting then running again keeps the first start.
		for _, st := range []runs.State{runs.Waiting, runs.Interrupted, runs.Running} {
			if err := s.UpdateRunStatus(ctx, "r", st); err != nil {
				t.Fatalf("to %s: %v", st, err)
			}
		}
		r, _ = s.GetRun(ctx, "r")
		if !r.StartedAt.Equal(started) {
			t.Errorf("started_at moved from %v to %v on resume", started, r.StartedAt)
		}

		usage := engine.Usage{InputTokens: 1200, OutputTokens: 340, CostUSD: 0.25, CostUnknown: true}
		if err := s.FinishRun(ctx, "r", runs.Failed, "tests failed 3 times", usage); err != nil {
			t.Fatal(err)
		}
		r, _ = s.GetRun(ctx, "r")
		if r.Status != runs.Failed || r.FailureReason != "tests failed 3 times" || r.Usage != usage || r.FinishedAt.IsZero() {
			t.Errorf("after finish: %+v", r)
		}
		if d := r.Duration(time.Now()); d <= 0 || d != r.FinishedAt.Sub(r.StartedAt) {
			t.Errorf("duration %v", d)
		}

		// The outcome is final.
		if err := s.FinishRun(ctx, "r", runs.Cancelled, "", engine.Usage{}); !errors.Is(err, ErrRunFinished) ||
			!strings.Contains(err.Error(), "ended as fail") {
			t.Errorf("second finish: %v, want ErrRunFinished naming fail", err)
		}
		if err := s.UpdateRunStatus(ctx, "r", runs.Running); !errors.Is(err, ErrRunFinished) {
			t.Errorf("revive finished run: %v, want ErrRunFinished", err)
		}
		r, _ = s.GetRun(ctx, "r")
		if r.Status != runs.Failed {
			t.Errorf("finished run changed to %s", r.Status)
		}
	})
}

func TestRunStatusErrors(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		createTestRun(t, s, "r")
		if err := s.UpdateRunStatus(ctx, "nope", runs.Running); !errors.Is(err, ErrNotFound) {
			t.Errorf("unknown run: %v, want ErrNotFound", err)
		}
		if err := s.FinishRun(ctx, "nope", runs.Succeeded, "", engine.Usage{}); !errors.Is(err, ErrNotFound) {
			t.Errorf("finish unknown run: %v, want ErrNotFound", err)
		}
		if err := s.UpdateRunStatus(ctx, "r", runs.Succeeded); err == nil || !strings.Contains(err.Error(), "FinishRun") {
			t.Errorf("final status via UpdateRunStatus: %v, want pointer to FinishRun", err)
		}
		if err := s.FinishRun(ctx, "r", runs.Waiting, "", engine.Usage{}); err == nil {
			t.Error("FinishRun accepted waiting")
		}
		if err := s.UpdateRunStatus(ctx, "r", "paused"); err == nil {
			t.Error("accepted unknown status")
		}
		if _, err := s.GetRun(ctx, "nope"); !errors.Is(err, ErrNotFound) {
			t.Errorf("GetRun unknown: %v", err)
		}
	})
}

func TestFinishQueuedRunSetsStart(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		createTestRun(t, s, "r")
		if err := s.FinishRun(ctx, "r", runs.Cancelled, "cancelled by U1 before it started", engine.Usage{}); err != nil {
			t.Fatal(err)
		}
		r, _ := s.GetRun(ctx, "r")
		if r.StartedAt.IsZero() || r.Duration(time.Now()) < 0 {
			t.Errorf("cancelled-before-start run: started %v duration %v", r.StartedAt, r.Duration(time.Now()))
		}
	})
}

func TestRunThread(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		createTestRun(t, s, "old")
		createTestRun(t, s, "new")
		for _, id := range []string{"old", "new"} {
			if err := s.SetRunThread(ctx, id, "1700000000.000100"); err != nil {
				t.Fatal(err)
			}
		}
		r, err := s.RunByThread(ctx, "C1", "1700000000.000100")
		if err != nil {
			t.Fatal(err)
		}
		if r.ID != "new" || r.SourceDOT == "" {
			t.Errorf("RunByThread = %s (dot %d bytes), want the newest run with its source", r.ID, len(r.SourceDOT))
		}
		if _, err := s.RunByThread(ctx, "C2", "1700000000.000100"); !errors.Is(err, ErrNotFound) {
			t.Errorf("other chat: %v, want ErrNotFound", err)
		}
		if err := s.SetRunThread(ctx, "nope", "1"); !errors.Is(err, ErrNotFound) {
			t.Errorf("unknown run: %v", err)
		}
	})
}

// seedRuns creates n runs one second apart: run-0000 oldest. Every third
// is in group "ops", runs alternate chats C1/C2, and statuses cycle.
func seedRuns(t testing.TB, s *Store, n int) {
	t.Helper()
	ctx := context.Background()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cycle := []runs.State{runs.Succeeded, runs.Failed, runs.Running, runs.Queued}
	for i := range n {
		r := runs.Run{ID: fmt.Sprintf("run-%04d", i), GroupFolder: "main", ChatID: fmt.Sprintf("C%d", 1+i%2),
			SourceDOT: testDOT, Status: cycle[i%len(cycle)], CreatedAt: base.Add(time.Duration(i) * time.Second)}
		if i%3 == 0 {
			r.GroupFolder = "ops"
		}
		if err := s.CreateRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
}

func TestListRunsFiltersAndOrder(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		seedRuns(t, s, 12)

		page, err := s.ListRuns(ctx, runs.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Runs) != 12 || page.Runs[0].ID != "run-0011" || page.Runs[11].ID != "run-0000" || page.Next != "" {
			t.Fatalf("unfiltered: %d runs, first %s, next %q; want 12 newest first, no next", len(page.Runs), page.Runs[0].ID, page.Next)
		}
		if page.Runs[0].SourceDOT != "" {
			t.Error("ListRuns returned the DOT source; it should leave it out")
		}

		for name, tc := range map[string]struct {
			f    runs.Filter
			want []string
		}{
			"status":        {runs.Filter{Statuses: []runs.State{runs.Failed}}, []string{"run-0009", "run-0005", "run-0001"}},
			"two statuses":  {runs.Filter{Statuses: []runs.State{runs.Failed, runs.Queued}}, []string{"run-0011", "run-0009", "run-0007", "run-0005", "run-0003", "run-0001"}},
			"group":         {runs.Filter{Group: "ops"}, []string{"run-0009", "run-0006", "run-0003", "run-0000"}},
			"chat":          {runs.Filter{Chat: "C2", Limit: 3}, []string{"run-0011", "run-0009", "run-0007"}},
			"group+status":  {runs.Filter{Group: "ops", Statuses: []runs.State{runs.Succeeded}}, []string{"run-0000"}},
			"nothing":       {runs.Filter{Group: "nobody"}, nil},
			"limit":         {runs.Filter{Limit: 2}, []string{"run-0011", "run-0010"}},
			"chat+group":    {runs.Filter{Chat: "C1", Group: "ops"}, []string{"run-0006", "run-0000"}},
			"status+limit1": {runs.Filter{Statuses: []runs.State{runs.Running}, Limit: 1}, []string{"run-0010"}},
		} {
			page, err := s.ListRuns(ctx, tc.f)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			if got := runIDs(page.Runs); strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("%s: got %v, want %v", name, got, tc.want)
			}
		}
	})
}

func runIDs(list []runs.Run) []string {
	var ids []string
	for _, r := range list {
		ids = append(ids, r.ID)
	}
	return ids
}

func TestListRunsPaginatesWithCursor(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		seedRuns(t, s, 25)
		var all []string
		f := runs.Filter{Limit: 10}
		for pages := 0; ; pages++ {
			if pages > 5 {
				t.Fatal("pagination does not end")
			}
			page, err := s.ListRuns(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, runIDs(page.Runs)...)
			if page.Next == "" {
				break
			}
			f.Cursor = page.Next
			// A run added while paging does not shift later pages.
			if pages == 0 {
				createTestRun(t, s, "run-late")
			}
		}
		if len(all) != 25 || all[0] != "run-0024" || all[24] != "run-0000" {
			t.Errorf("paged through %d runs (%s…%s), want the 25 seeded newest first", len(all), all[0], all[len(all)-1])
		}
		seen := map[string]bool{}
		for _, id := range all {
			if seen[id] {
				t.Errorf("%s on two pages", id)
			}
			seen[id] = true
		}
		if _, err := s.ListRuns(ctx, runs.Filter{Cursor: "garbage"}); err == nil || !strings.Contains(err.Error(), "cursor") {
			t.Errorf("bad cursor: %v", err)
		}
		if _, err := s.ListRuns(ctx, runs.Filter{Statuses: []runs.State{"done"}}); err == nil {
			t.Error("unknown status filter accepted")
		}
	})
}

func TestListRunsUsesIndexes(t *testing.T) {
	s := openTest(t)
	seedRuns(t, s, 50)
	for name, f := range map[string]runs.Filter{
		"all": {}, "status": {Statuses: []runs.State{runs.Failed}}, "group": {Group: "ops"}, "chat": {Chat: "C1"},
		"cursor": {Cursor: encodeCursor(time.Now(), "x")},
	} {
		where, args, err := runsWhere(f)
		if err != nil {
			t.Fatal(err)
		}
		plan := queryPlan(t, s, `SELECT `+runColumns+` FROM runs`+where+` ORDER BY created_at DESC, id DESC LIMIT 10`, args...)
		t.Logf("%s: %s", name, plan)
		if strings.Contains(plan, "SCAN runs") && !strings.Contains(plan, "USING INDEX") {
			t.Errorf("%s: full table scan: %s", name, plan)
		}
		if name != "status" && strings.Contains(plan, "TEMP B-TREE") {
			t.Errorf("%s: sorts in a temp b-tree instead of reading the index in order: %s", name, plan)
		}
	}
	plan := queryPlan(t, s, `SELECT id FROM runs WHERE status IN ('queued', 'running', 'waiting', 'interrupted') ORDER BY created_at, id`)
	if !strings.Contains(plan, "runs_status") {
		t.Errorf("UnfinishedRuns does not use runs_status: %s", plan)
	}
}

func queryPlan(t *testing.T, s *Store, q string, args ...any) string {
	t.Helper()
	rows, err := s.reader.db.Query("EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, detail)
	}
	return strings.Join(lines, "; ")
}

func TestUnfinishedRuns(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		for _, id := range []string{"a", "b", "c", "d", "e", "f"} {
			createTestRun(t, s, id)
		}
		s.UpdateRunStatus(ctx, "b", runs.Running)
		s.UpdateRunStatus(ctx, "c", runs.Waiting)
		s.UpdateRunStatus(ctx, "d", runs.Interrupted)
		s.FinishRun(ctx, "e", runs.Succeeded, "", engine.Usage{})
		s.FinishRun(ctx, "f", runs.Cancelled, "", engine.Usage{})

		list, err := s.UnfinishedRuns(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(runIDs(list), ","); got != "a,b,c,d" {
			t.Errorf("unfinished = %s, want a,b,c,d (oldest first)", got)
		}
		for _, r := range list {
			if r.SourceDOT != testDOT {
				t.Errorf("%s: no DOT source to resume from", r.ID)
			}
		}
	})
}

// A sub-pipeline's child run names its parent and the parent's node; the
// parent's children are listed by it.
func TestChildRunsNameTheirParent(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		for _, r := range []runs.Run{
			{ID: "parent", GroupFolder: "main", ChatID: "C1", SourceDOT: testDOT},
			{ID: "child-a", GroupFolder: "main", ChatID: "C1", SourceDOT: testDOT, Parent: "parent", ParentNode: "triage"},
			{ID: "child-b", GroupFolder: "main", ChatID: "C1", SourceDOT: testDOT, Parent: "parent", ParentNode: "fix"},
			{ID: "other", GroupFolder: "main", ChatID: "C1", SourceDOT: testDOT},
		} {
			if err := s.CreateRun(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		r, err := s.GetRun(ctx, "child-a")
		if err != nil || r.Parent != "parent" || r.ParentNode != "triage" {
			t.Fatalf("child-a: %+v, %v", r, err)
		}
		page, err := s.ListRuns(ctx, runs.Filter{Parent: "parent"})
		if err != nil {
			t.Fatal(err)
		}
		if got := runIDs(page.Runs); len(got) != 2 || page.Runs[0].Parent != "parent" {
			t.Errorf("children of parent: %v", got)
		}
		if p, _ := s.GetRun(ctx, "parent"); p.Parent != "" {
			t.Errorf("the parent has a parent: %q", p.Parent)
		}
	})
}
