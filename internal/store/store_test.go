package store

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runs"
	"nanohost/internal/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(storetest.Main(m)) }

// openTest opens a fresh SQLite store on a real file in a temp dir.
func openTest(t testing.TB) *Store {
	t.Helper()
	return openURL(t, filepath.Join(t.TempDir(), "data", "nanohost.db"))
}

// openURL opens the store at url (a SQLite path or a PostgreSQL URL),
// closed when the test ends.
func openURL(t testing.TB, url string) *Store {
	t.Helper()
	s, err := Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// eachBackend runs test on each database the store supports: a fresh
// SQLite file, and a fresh database on a real PostgreSQL server. url is
// what Open takes; a test may open it again (a restart).
func eachBackend(t *testing.T, test func(t *testing.T, url string)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) { test(t, filepath.Join(t.TempDir(), "data", "nanohost.db")) })
	t.Run("postgres", func(t *testing.T) { test(t, storetest.PostgresURL(t)) })
}

// eachStore runs test on a fresh store of each backend.
func eachStore(t *testing.T, test func(t *testing.T, s *Store)) {
	t.Helper()
	eachBackend(t, func(t *testing.T, url string) { test(t, openURL(t, url)) })
}

// precision is how finely the backend keeps times: SQLite to the
// nanosecond (text), PostgreSQL to the microsecond (timestamptz).
func (s *Store) precision() time.Duration {
	if s.b.name() == "postgres" {
		return time.Microsecond
	}
	return time.Nanosecond
}

const testDOT = `digraph T { start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit }`

// createTestRun stores a minimal queued run.
func createTestRun(t testing.TB, s *Store, id string) runs.Run {
	t.Helper()
	r := runs.Run{ID: id, GroupFolder: "main", ChatID: "C1", SourceDOT: testDOT, Goal: "test " + id}
	if err := s.CreateRun(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetRun(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func pragma(t *testing.T, s *Store, name string) string {
	t.Helper()
	var v string
	if err := s.writer.db.QueryRow("PRAGMA " + name).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestOpenConfiguresConnection(t *testing.T) {
	s := openTest(t)
	for name, want := range map[string]string{
		"journal_mode": "wal",
		"foreign_keys": "1",
		"synchronous":  "1", // NORMAL
		"busy_timeout": "5000",
	} {
		if got := pragma(t, s, name); got != want {
			t.Errorf("PRAGMA %s = %s, want %s", name, got, want)
		}
	}
	if got := s.writer.db.Stats().MaxOpenConnections; got != 1 {
		t.Errorf("writer pool allows %d connections, want 1", got)
	}
}

func TestOpenCreatesDirectoryAndMigrates(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "a", "b", "nanohost.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	v, err := s.SchemaVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := latestVersion(t); v != want {
		t.Errorf("schema version %d, want %d", v, want)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("database file not created: %v", err)
	}
}

func TestOpenPathWithURISpecialCharacters(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "odd ?name#%.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	createTestRun(t, s, "r1")
	s.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("database not at the exact path asked for: %v", err)
	}
}

func TestReopenKeepsDataAndDoesNotRemigrate(t *testing.T) {
	eachBackend(t, func(t *testing.T, url string) {
		ctx := context.Background()
		s, err := Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		createTestRun(t, s, "r1")
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s, err = Open(ctx, url)
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		defer s.Close()
		if _, err := s.GetRun(ctx, "r1"); err != nil {
			t.Errorf("run lost on reopen: %v", err)
		}
		var n int
		if err := s.reader.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if want := latestVersion(t); n != want {
			t.Errorf("schema_migrations has %d rows after reopen, want %d (one per migration)", n, want)
		}
	})
}

func TestOpenReadOnly(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "nanohost.db")

	_, err := OpenReadOnly(ctx, path)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("OpenReadOnly on a missing file: %v, want fs.ErrNotExist", err)
	}
	if _, statErr := os.Stat(path); statErr == nil {
		t.Fatal("OpenReadOnly created the file")
	}

	w, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	createTestRun(t, w, "r1")

	check := func(phase string) {
		r, err := OpenReadOnly(ctx, path)
		if err != nil {
			t.Fatalf("%s: %v", phase, err)
		}
		defer r.Close()
		if _, err := r.GetRun(ctx, "r1"); err != nil {
			t.Errorf("%s: read: %v", phase, err)
		}
		if err := r.CreateRun(ctx, runs.Run{ID: "r2", GroupFolder: "g", ChatID: "c", SourceDOT: testDOT}); !errors.Is(err, ErrReadOnly) {
			t.Errorf("%s: write on read-only store: %v, want ErrReadOnly", phase, err)
		}
	}
	check("host running") // WAL and -shm files present
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	check("host stopped")
}

func TestOpenReadOnlyPostgres(t *testing.T) {
	ctx := context.Background()
	url := storetest.PostgresURL(t)
	if _, err := OpenReadOnly(ctx, url); !errors.Is(err, ErrSchemaVersion) {
		t.Fatalf("OpenReadOnly on an empty database: %v, want ErrSchemaVersion (start the host once to create the schema)", err)
	}
	w := openURL(t, url)
	createTestRun(t, w, "r1")
	r, err := OpenReadOnly(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.GetRun(ctx, "r1"); err != nil {
		t.Errorf("read: %v", err)
	}
	if err := r.CreateRun(ctx, runs.Run{ID: "r2", GroupFolder: "g", ChatID: "c", SourceDOT: testDOT}); !errors.Is(err, ErrReadOnly) {
		t.Errorf("write on read-only store: %v, want ErrReadOnly", err)
	}
	// Not even a statement slipped past the store's own check changes it.
	if _, err := r.reader.ExecContext(ctx, `DELETE FROM runs`); err == nil {
		t.Error("a read-only PostgreSQL connection deleted rows")
	}
	if strings.Contains(r.Path(), "password") {
		t.Errorf("Path shows the password: %s", r.Path())
	}
}

func TestOpenReadOnlyRejectsForeignFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(path, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenReadOnly(context.Background(), path); err == nil {
		t.Fatal("OpenReadOnly accepted a text file")
	}
}

func TestTimesRoundTripInUTC(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		loc := time.FixedZone("UTC+5", 5*3600)
		at := time.Date(2026, 2, 28, 15, 0, 0, 123456789, loc)
		if err := s.CreateRun(ctx, runs.Run{ID: "r", GroupFolder: "g", ChatID: "c", SourceDOT: testDOT, CreatedAt: at}); err != nil {
			t.Fatal(err)
		}
		r, err := s.GetRun(ctx, "r")
		if err != nil {
			t.Fatal(err)
		}
		if want := at.Round(s.precision()); !r.CreatedAt.Equal(want) {
			t.Errorf("created_at %v, want %v (kept to the %s)", r.CreatedAt, want, s.precision())
		}
		if r.CreatedAt.Location() != time.UTC {
			t.Errorf("times come back in %v, want UTC", r.CreatedAt.Location())
		}
	})
}

func TestEventPayloadRoundTrip(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		createTestRun(t, s, "r")
		in := engine.Event{
			RunID: "r", Seq: 1, Time: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), Type: engine.EventStageCompleted,
			NodeID: "impl", Label: "Implement", Index: 2, Total: 5, Status: engine.StatusSuccess,
			Duration: 90 * time.Second, Usage: &engine.Usage{InputTokens: 10, OutputTokens: 20, CostUSD: 0.5},
			Decision: &engine.Decision{From: "impl", To: "test", Rule: "condition", Values: map[string]string{"condition": "outcome=success"}},
			Data:     map[string]any{"k": "v"},
		}
		if _, err := s.AppendEvent(ctx, in); err != nil {
			t.Fatal(err)
		}
		out, err := s.Events(ctx, "r", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(out) != 1 {
			t.Fatalf("got %d events", len(out))
		}
		got := out[0]
		if !got.Time.Equal(in.Time) || got.Label != in.Label || got.Duration != in.Duration ||
			*got.Usage != *in.Usage || got.Decision.Values["condition"] != "outcome=success" || got.Data["k"] != "v" {
			t.Errorf("event changed on the way through the store:\n got %+v\nwant %+v", got, in)
		}
	})
}
