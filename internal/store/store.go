// Package store is nanohost's durable state: chats, groups, messages,
// agent sessions, pipeline runs with their event logs, human gates and the
// IPC idempotency log — and, for host replicas sharing one database, who
// drives each run (leases), runs' journals and stage files, and the claims
// on inbound chat events.
//
// Two databases: SQLite, one file, the embedded default (sqlite.go), and
// PostgreSQL, which several `nanohost serve` replicas share (postgres.go).
// The queries and rules are the store's own, written once; a backend says
// how to connect, its schema history (migrations/sqlite, migrations/
// postgres: the same versions with the same meaning) and the few SQL
// spellings that differ.
package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"nanohost/internal/runs"
)

var (
	// ErrNotFound reports a missing row (run, gate, group, chat, session…).
	ErrNotFound = errors.New("not found")
	// ErrExists reports an insert of a key that is already stored.
	ErrExists = errors.New("already exists")
	// ErrRunFinished reports a change to a run that already succeeded,
	// failed or was cancelled: its outcome is final. It is the runs
	// package's ErrRunEnded: one refusal, whoever asks.
	ErrRunFinished = runs.ErrRunEnded
	// ErrReadOnly reports a write on a store opened with OpenReadOnly.
	ErrReadOnly = errors.New("store is read-only")
	// ErrSchemaVersion reports a database whose schema this binary cannot use.
	ErrSchemaVersion = errors.New("unsupported database schema version")
)

// Store is nanohost's state on SQLite or PostgreSQL. It is safe for
// concurrent use, and (on PostgreSQL) by several host replicas at once.
type Store struct {
	// path is what it was opened on: the SQLite file, or the PostgreSQL
	// URL without its password.
	path   string
	b      backend
	writer *conn // nil when read-only
	reader *conn
	// replica names the host replica using the store, for leases and
	// claims (see Replica).
	replica string
	// pg is set on PostgreSQL: its notifications and leases.
	pg *pgExtras
	// shared queues the small writes that go in one commit (groupcommit.go).
	shared sharedWrites
}

// Open opens the store at dsn and migrates it to the latest schema:
// a postgres:// (or postgresql://) URL opens PostgreSQL, anything else is
// the SQLite file at that path (created, with its directory, if needed).
// Opening an up-to-date database changes nothing.
func Open(ctx context.Context, dsn string) (*Store, error) {
	if isPostgresURL(dsn) {
		return openPostgres(ctx, dsn, false)
	}
	return openWith(ctx, dsn, defaultConfig)
}

// OpenReadOnly opens an existing database for reading only (the CLI's
// `nanohost runs`). For SQLite it fails with an error wrapping
// fs.ErrNotExist when there is no file at dsn; for either it fails with
// ErrSchemaVersion when the schema is not the one this binary writes (the
// host migrates it when it starts).
func OpenReadOnly(ctx context.Context, dsn string) (*Store, error) {
	if isPostgresURL(dsn) {
		return openPostgres(ctx, dsn, true)
	}
	return openSQLiteReadOnly(ctx, dsn)
}

// isPostgresURL reports whether dsn names a PostgreSQL database.
func isPostgresURL(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://")
}

// Backend is "sqlite" or "postgres", for people to read (what the store
// can do is its Capabilities).
func (s *Store) Backend() string { return s.b.name() }

// Capabilities are what a store can do beyond keeping one host's history:
// declared by the store, so that callers ask what it can, not what it is.
type Capabilities struct {
	// Replicas: several host replicas can use the store at once
	// (PostgreSQL): runs are shared by leases, each owner shown; replicas
	// wake each other through it.
	Replicas bool
	// Journals: runs keep their journal, snapshot and copies of their
	// stage files in the store, so any replica resumes any run and serves
	// its files.
	Journals bool
}

// Capabilities says what this store can do.
func (s *Store) Capabilities() Capabilities {
	shared := s.b.shared()
	return Capabilities{Replicas: shared, Journals: shared}
}

func (s *Store) checkSchema(ctx context.Context) error {
	ms, err := loadMigrations(s.b.migrations())
	if err != nil {
		return err
	}
	have, err := schemaVersion(ctx, s.b, s.reader)
	if err != nil {
		return err
	}
	want := ms[len(ms)-1].version
	switch {
	case have == 0:
		return fmt.Errorf("%w: not a nanohost database (no schema_migrations table)", ErrSchemaVersion)
	case have < want:
		return fmt.Errorf("%w: schema version %d is older than this nanohost's %d; start `nanohost serve` once to migrate it", ErrSchemaVersion, have, want)
	case have > want:
		return fmt.Errorf("%w: schema version %d is newer than this nanohost's %d; upgrade nanohost", ErrSchemaVersion, have, want)
	}
	return nil
}

// Path is the database the store was opened on: the SQLite file, or the
// PostgreSQL URL without its password.
func (s *Store) Path() string { return s.path }

// Close closes the connections (and on SQLite first refreshes the query
// planner's statistics; the last connection to close checkpoints the WAL
// into the main file).
func (s *Store) Close() error {
	var errs []error
	if s.pg != nil {
		errs = append(errs, s.pg.close())
	}
	if s.reader != nil && (s.writer == nil || s.reader.db != s.writer.db) {
		errs = append(errs, s.reader.db.Close())
	}
	if s.writer != nil {
		if s.b.name() == "sqlite" {
			// Best effort: statistics only make later queries faster.
			_, _ = s.writer.db.Exec("PRAGMA optimize")
		}
		errs = append(errs, s.writer.db.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close store %s: %w", s.path, err)
	}
	return nil
}

// write runs fn in one write transaction (on SQLite, BEGIN IMMEDIATE on
// the single writer connection). fn must not use the store's other
// methods: on SQLite the only writer connection is the one it holds.
func (s *Store) write(ctx context.Context, fn func(tx *txn) error) error {
	if s.writer == nil {
		return ErrReadOnly
	}
	err := s.writeTx(ctx, fn)
	s.writer.health.note(err)
	return err
}

func (s *Store) writeTx(ctx context.Context, fn func(tx *txn) error) error {
	tx, err := s.writer.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(&txn{tx: tx, b: s.b}); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// violated reports whether err is a violation of the given kind.
func (s *Store) violated(err error, kind violationKind) bool {
	if err == nil {
		return false
	}
	k, _ := s.b.violation(err)
	return k == kind
}

// limit is a LIMIT argument: n, or all rows when n <= 0.
func (s *Store) limit(n int) any {
	if n <= 0 {
		return s.b.noLimit()
	}
	return n
}
