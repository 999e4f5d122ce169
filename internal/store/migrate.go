package store

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
	"time"
)

// The schema history is one SQL file per version, NNNN_description.sql,
// for each backend (migrations/sqlite, migrations/postgres): version N
// means the same schema on both. Never edit a released file: add a new
// one, to both.

type migration struct {
	version int
	name    string // file name, recorded in schema_migrations
	sql     string
}

var migrationName = regexp.MustCompile(`^(\d{4})_[a-z0-9_]+\.sql$`)

// loadMigrations reads the *.sql files of fsys, sorted by version, and
// checks the versions run 1, 2, 3… without gaps or duplicates.
func loadMigrations(fsys fs.FS) ([]migration, error) {
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, fmt.Errorf("list migrations: %w", err)
	}
	var ms []migration
	for _, p := range names {
		name := path.Base(p)
		m := migrationName.FindStringSubmatch(name)
		if m == nil {
			return nil, fmt.Errorf("migration file %s: name it NNNN_description.sql (lower case)", name)
		}
		v, _ := strconv.Atoi(m[1])
		body, err := fs.ReadFile(fsys, p)
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", name, err)
		}
		ms = append(ms, migration{version: v, name: name, sql: string(body)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %s: expected version %04d (versions must run 1, 2, 3… without gaps or duplicates)", m.name, i+1)
		}
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("no migrations found")
	}
	return ms, nil
}

const createMigrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    applied_at TEXT NOT NULL
)`

// migrate applies the migrations newer than the database's version, each in
// its own transaction together with its schema_migrations row, so a crash
// leaves the database at a whole version. The version is re-read inside
// each transaction, which excludes other migrators (SQLite: IMMEDIATE;
// PostgreSQL: an advisory lock), so two processes opening the same
// database at once apply every migration exactly once.
func migrate(ctx context.Context, b backend, db *sql.DB, ms []migration) error {
	latest := ms[len(ms)-1].version
	for _, m := range ms {
		if err := applyMigration(ctx, b, db, m, latest); err != nil {
			return err
		}
	}
	return nil
}

func applyMigration(ctx context.Context, b backend, db *sql.DB, m migration, latest int) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migration %s: begin: %w", m.name, err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	if err := b.lockMigrations(ctx, tx); err != nil {
		return fmt.Errorf("migration %s: wait for other migrators: %w", m.name, err)
	}
	if _, err := tx.ExecContext(ctx, createMigrationsTable); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	have, err := schemaVersion(ctx, b, &txn{tx: tx, b: b})
	if err != nil {
		return err
	}
	if have > latest {
		return fmt.Errorf("%w: schema version %d is newer than this nanohost's %d; upgrade nanohost", ErrSchemaVersion, have, latest)
	}
	if have >= m.version {
		return nil
	}
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return fmt.Errorf("migration %s: %w", m.name, err)
	}
	if _, err := tx.ExecContext(ctx,
		b.rebind(`INSERT INTO schema_migrations(version, name, applied_at) VALUES (?, ?, ?)`),
		m.version, m.name, encTime(time.Now())); err != nil {
		return fmt.Errorf("migration %s: record version: %w", m.name, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migration %s: commit: %w", m.name, err)
	}
	return nil
}

// schemaVersion is the highest applied migration, 0 for a database that
// has none (or no schema_migrations table yet).
func schemaVersion(ctx context.Context, b backend, q queryer) (int, error) {
	exists, err := b.hasTable(ctx, q, "schema_migrations")
	if err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	if !exists {
		return 0, nil
	}
	var v int
	if err := q.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

// SchemaVersion reports the database's applied schema version.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	return schemaVersion(ctx, s.b, s.reader)
}
