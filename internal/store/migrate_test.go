package store

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runs"
)

func latestVersion(t testing.TB) int {
	t.Helper()
	ms, err := loadMigrations(sqliteBackend{}.migrations())
	if err != nil {
		t.Fatal(err)
	}
	return ms[len(ms)-1].version
}

// openRawWriter opens a writer connection the way the store does, without
// migrating, to build databases at older versions.
func openRawWriter(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite3", writerDSN(path, defaultConfig))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	return db
}

func TestOpenMigratesVersion1Database(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	ms, err := loadMigrations(sqliteBackend{}.migrations())
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) < 2 {
		t.Skip("only one migration exists")
	}

	// A database as the first release left it, with some state in it.
	db := openRawWriter(t, path)
	if err := migrate(ctx, sqliteBackend{}, db, ms[:1]); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO chats (chat_id, channel, name, created_at, updated_at) VALUES ('C1', 'slack', 'dev', '2025-01-01T00:00:00.000000000Z', '2025-01-01T00:00:00.000000000Z')`,
		`INSERT INTO groups (folder, name, chat_id, is_main, created_at) VALUES ('main', 'Main', 'C1', 1, '2025-01-01T00:00:00.000000000Z')`,
		`UPDATE chats SET group_folder = 'main' WHERE chat_id = 'C1'`,
		`INSERT INTO sessions (group_folder, thread_key, session_id, updated_at) VALUES ('main', '', 'sess-1', '2025-01-01T00:00:00.000000000Z')`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()

	s, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("open version-1 database: %v", err)
	}
	defer s.Close()
	if v, _ := s.SchemaVersion(ctx); v != latestVersion(t) {
		t.Errorf("schema version %d after open, want %d", v, latestVersion(t))
	}
	g, err := s.GroupByChat(ctx, "C1")
	if err != nil || g.Folder != "main" || !g.IsMain {
		t.Errorf("group lost in migration: %+v, %v", g, err)
	}
	if id, err := s.GetSession(ctx, "main", ""); err != nil || id != "sess-1" {
		t.Errorf("session lost in migration: %q, %v", id, err)
	}
	// The new tables work.
	createTestRun(t, s, "r1")
	if _, _, err := s.OpenGate(ctx, runs.Gate{RunID: "r1", GateID: "review-1", NodeID: "review"}); err != nil {
		t.Errorf("gates table unusable after migration: %v", err)
	}
}

// Migration 5 rebuilds runs, run_events and gates to give states one
// vocabulary: a version-4 database keeps every run, event and gate, under
// the new words, with its triggers, indexes and cascades working.
func TestMigration5KeepsRunsEventsAndGates(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "v4.db")
	ms, err := loadMigrations(sqliteBackend{}.migrations())
	if err != nil {
		t.Fatal(err)
	}
	db := openRawWriter(t, path)
	if err := migrate(ctx, sqliteBackend{}, db, ms[:4]); err != nil {
		t.Fatal(err)
	}
	const at = "'2025-01-01T00:00:00.000000000Z'"
	for _, q := range []string{
		`INSERT INTO runs (id, group_folder, chat_id, source_dot, status, created_at, last_seq, last_delivered_seq) VALUES
			('ok', 'main', 'C1', 'digraph{}', 'success', ` + at + `, 0, 0),
			('bad', 'main', 'C1', 'digraph{}', 'fail', ` + at + `, 0, 0),
			('stop', 'main', 'C1', 'digraph{}', 'interrupted', ` + at + `, 0, 0)`,
		`INSERT INTO run_events (run_id, seq, type, time, payload) VALUES ('bad', 1, 'PipelineStarted', ` + at + `, '{}'),
			('bad', 2, 'PipelineFailed', ` + at + `, '{}')`,
		`INSERT INTO gates (run_id, gate_id, node_id, question, nonce, asked_at, status, answer, answered_by) VALUES
			('ok', 'review-1', 'review', 'Ship?', 'n1', ` + at + `, 'answered', 'A', 'U1'),
			('bad', 'review-1', 'review', 'Ship?', 'n2', ` + at + `, 'timeout', '', ''),
			('stop', 'review-1', 'review', 'Ship?', 'n3', ` + at + `, 'cancelled', '', '')`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()

	s, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("open version-4 database: %v", err)
	}
	defer s.Close()
	for id, want := range map[string]runs.State{"ok": runs.Succeeded, "bad": runs.Failed, "stop": runs.Interrupted} {
		r, err := s.GetRun(ctx, id)
		if err != nil || r.Status != want {
			t.Errorf("run %s after migration: %q, %v; want %q", id, r.Status, err, want)
		}
	}
	if r, _ := s.GetRun(ctx, "bad"); r.LastSeq != 2 {
		t.Errorf("last_seq of run bad = %d, want 2", r.LastSeq)
	}
	for id, want := range map[string]runs.GateState{"ok": runs.GateAnswered, "bad": runs.GateTimedOut, "stop": runs.GateWithdrawn} {
		g, err := s.GetGate(ctx, id, "review-1")
		if err != nil || g.Status != want {
			t.Errorf("gate of run %s after migration: %q, %v; want %q", id, g.Status, err, want)
		}
	}
	if events, err := s.Events(ctx, "bad", 0, 0); err != nil || len(events) != 2 {
		t.Errorf("events after migration: %d, %v; want 2", len(events), err)
	}
	// The triggers came back: an append advances last_seq, an edit is refused.
	if _, err := s.AppendEvent(ctx, engine.Event{RunID: "bad", Seq: 3, Type: engine.EventWarning}); err != nil {
		t.Fatal(err)
	}
	if r, _ := s.GetRun(ctx, "bad"); r.LastSeq != 3 {
		t.Errorf("last_seq after an append = %d, want 3 (trigger lost?)", r.LastSeq)
	}
	if _, err := s.writer.ExecContext(ctx, `UPDATE run_events SET type = 'x' WHERE run_id = 'bad'`); err == nil {
		t.Error("run_events accepted an UPDATE after migration (append-only trigger lost)")
	}
	// The references point at the new runs table: deleting a run cascades.
	if _, err := s.writer.ExecContext(ctx, `DELETE FROM runs WHERE id = 'bad'`); err != nil {
		t.Fatal(err)
	}
	var left int
	s.writer.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM run_events WHERE run_id = 'bad') + (SELECT count(*) FROM gates WHERE run_id = 'bad')`).Scan(&left)
	if left != 0 {
		t.Errorf("%d events/gates of a deleted run left: the references were not rewritten to the new runs table", left)
	}
	var fk string
	s.writer.QueryRowContext(ctx, `SELECT sql FROM sqlite_master WHERE name = 'gates'`).Scan(&fk)
	if strings.Contains(fk, "runs_v5") {
		t.Errorf("gates still references runs_v5: %s", fk)
	}
}

func TestFailedMigrationLeavesPreviousVersion(t *testing.T) {
	ctx := context.Background()
	fsys := fstest.MapFS{
		"0001_first.sql":  {Data: []byte(`CREATE TABLE a (x INTEGER);`)},
		"0002_broken.sql": {Data: []byte(`CREATE TABLE b (y INTEGER); INSERT INTO nowhere VALUES (1);`)},
	}
	ms, err := loadMigrations(fsys)
	if err != nil {
		t.Fatal(err)
	}
	db := openRawWriter(t, filepath.Join(t.TempDir(), "x.db"))
	defer db.Close()

	err = migrate(ctx, sqliteBackend{}, db, ms)
	if err == nil || !strings.Contains(err.Error(), "0002_broken.sql") {
		t.Fatalf("migrate: %v, want an error naming 0002_broken.sql", err)
	}
	if v, _ := schemaVersion(ctx, sqliteBackend{}, &conn{db: db, b: sqliteBackend{}}); v != 1 {
		t.Errorf("version %d after failed migration 2, want 1", v)
	}
	var n int
	db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name = 'b'`).Scan(&n)
	if n != 0 {
		t.Error("table b from the failed migration exists: the migration was not atomic")
	}

	// Fixed, it applies on the next open.
	fsys["0002_broken.sql"] = &fstest.MapFile{Data: []byte(`CREATE TABLE b (y INTEGER);`)}
	ms, _ = loadMigrations(fsys)
	if err := migrate(ctx, sqliteBackend{}, db, ms); err != nil {
		t.Fatal(err)
	}
	if v, _ := schemaVersion(ctx, sqliteBackend{}, &conn{db: db, b: sqliteBackend{}}); v != 2 {
		t.Errorf("version %d, want 2", v)
	}
}

func TestOpenRejectsNewerSchema(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "new.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.writer.db.Exec(`INSERT INTO schema_migrations VALUES (99, '0099_future.sql', '2030-01-01T00:00:00.000000000Z')`); err != nil {
		t.Fatal(err)
	}
	s.Close()

	_, err = Open(ctx, path)
	if !errors.Is(err, ErrSchemaVersion) || !strings.Contains(err.Error(), "upgrade nanohost") {
		t.Errorf("Open on a newer schema: %v, want ErrSchemaVersion telling to upgrade", err)
	}
	_, err = OpenReadOnly(ctx, path)
	if !errors.Is(err, ErrSchemaVersion) {
		t.Errorf("OpenReadOnly on a newer schema: %v, want ErrSchemaVersion", err)
	}
}

func TestOpenReadOnlyRejectsOlderSchema(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	ms, _ := loadMigrations(sqliteBackend{}.migrations())
	db := openRawWriter(t, path)
	if err := migrate(ctx, sqliteBackend{}, db, ms[:1]); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err := OpenReadOnly(ctx, path)
	if !errors.Is(err, ErrSchemaVersion) || !strings.Contains(err.Error(), "nanohost serve") {
		t.Errorf("OpenReadOnly on version 1: %v, want ErrSchemaVersion telling to run nanohost serve", err)
	}
}

func TestConcurrentOpensMigrateOnce(t *testing.T) {
	eachBackend(t, func(t *testing.T, url string) {
		ctx := context.Background()
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Go(func() {
				s, err := Open(ctx, url)
				if err == nil {
					s.Close()
				}
				errs[i] = err
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("open %d: %v", i, err)
			}
		}
		s := openURL(t, url)
		var n int
		s.reader.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations`).Scan(&n)
		if n != latestVersion(t) {
			t.Errorf("%d migration rows, want %d", n, latestVersion(t))
		}
	})
}

// Version N means the same schema on both backends: the two histories have
// the same versions under the same names.
func TestBackendsShareSchemaVersions(t *testing.T) {
	lite, err := loadMigrations(sqliteBackend{}.migrations())
	if err != nil {
		t.Fatal(err)
	}
	pg, err := loadMigrations(postgresBackend{}.migrations())
	if err != nil {
		t.Fatal(err)
	}
	var a, b []string
	for _, m := range lite {
		a = append(a, m.name)
	}
	for _, m := range pg {
		b = append(b, m.name)
	}
	if !slices.Equal(a, b) {
		t.Errorf("schema histories differ:\n sqlite:   %v\n postgres: %v\nadd each migration to both (migrations/sqlite, migrations/postgres)", a, b)
	}
}

func TestLoadMigrationsRejectsBadSets(t *testing.T) {
	for name, fsys := range map[string]fstest.MapFS{
		"gap": {
			"0001_a.sql": {Data: []byte("SELECT 1;")},
			"0003_c.sql": {Data: []byte("SELECT 1;")},
		},
		"duplicate": {
			"0001_a.sql": {Data: []byte("SELECT 1;")},
			"0001_b.sql": {Data: []byte("SELECT 1;")},
		},
		"bad name": {
			"1_a.sql": {Data: []byte("SELECT 1;")},
		},
		"empty": {},
	} {
		if _, err := loadMigrations(fsys); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
