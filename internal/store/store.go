// Package store is nanohost's durable state: one SQLite file holding chats,
// groups, messages, agent sessions, pipeline runs with their event logs,
// human gates and the IPC idempotency log.
//
// Connections. SQLite allows one writer at a time. The store keeps two
// pools: a writer pool of exactly one connection, so every write
// transaction is queued in Go instead of racing for SQLite's lock (no
// SQLITE_BUSY between the host's own goroutines, whatever the load), and a
// pool of read-only connections that WAL lets run alongside the writer.
// Write transactions also begin IMMEDIATE, so a transaction that reads
// before it writes cannot fail to upgrade its lock when another process
// (a second host by mistake, the sqlite3 shell) writes; busy_timeout makes
// such cross-process contention wait instead of fail.
//
// Durability. journal_mode=WAL with synchronous=NORMAL: a commit is durable
// once it is in the WAL, which survives a crash of the host process; only
// an OS crash or power loss can lose the last transactions, and never
// corrupts the file. FULL would fsync on every commit — one per engine
// event — for no gain a chat-ops history needs (see BenchmarkSynchronous).
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"

	"github.com/mattn/go-sqlite3"

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

// busyTimeoutMS bounds how long a connection waits for a lock held by
// another process before failing with SQLITE_BUSY.
const busyTimeoutMS = 5000

// Store is the SQLite-backed state. It is safe for concurrent use.
type Store struct {
	path   string
	writer *sql.DB // nil when read-only
	reader *sql.DB
}

// config is how the connections are set up. Only benchmarks and tests
// change it, to measure the alternatives the defaults were chosen over.
type config struct {
	writerConns int    // max open writer connections
	txLock      string // "immediate" or "deferred"
	synchronous string // "NORMAL" or "FULL"
}

var defaultConfig = config{writerConns: 1, txLock: "immediate", synchronous: "NORMAL"}

// Open opens (creating it and its directory if needed) the database at
// path and migrates it to the latest schema. Opening an up-to-date
// database changes nothing.
func Open(ctx context.Context, path string) (*Store, error) {
	return openWith(ctx, path, defaultConfig)
}

func openWith(ctx context.Context, path string, cfg config) (*Store, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o750); err != nil {
		return nil, fmt.Errorf("open store %s: create directory: %w", path, err)
	}
	writer, err := sql.Open("sqlite3", writerDSN(abs, cfg))
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	writer.SetMaxOpenConns(cfg.writerConns)
	writer.SetMaxIdleConns(cfg.writerConns)
	s := &Store{path: path, writer: writer}
	if err := s.initWriter(ctx); err != nil {
		writer.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	// The reader pool opens after the writer created the file and its WAL.
	s.reader, err = openReader(abs)
	if err != nil {
		writer.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return s, nil
}

func (s *Store) initWriter(ctx context.Context) error {
	var mode string
	if err := s.writer.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	if mode != "wal" {
		return fmt.Errorf("journal_mode is %q, want wal (is the file on a filesystem without shared memory?)", mode)
	}
	ms, err := loadMigrations(migrationFiles)
	if err != nil {
		return err
	}
	return migrate(ctx, s.writer, ms)
}

// OpenReadOnly opens an existing database for reading only (the CLI's
// `nanohost runs`). It fails with an error wrapping fs.ErrNotExist when
// there is no file at path, and with ErrSchemaVersion when the schema is
// not the one this binary writes (the host migrates it when it starts).
func OpenReadOnly(ctx context.Context, path string) (*Store, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	if _, err := os.Stat(abs); err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	reader, err := openReader(abs)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	s := &Store{path: path, reader: reader}
	if err := s.checkSchema(ctx); err != nil {
		reader.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return s, nil
}

func (s *Store) checkSchema(ctx context.Context) error {
	ms, err := loadMigrations(migrationFiles)
	if err != nil {
		return err
	}
	have, err := schemaVersion(ctx, s.reader)
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

func openReader(abs string) (*sql.DB, error) {
	db, err := sql.Open("sqlite3", readerDSN(abs))
	if err != nil {
		return nil, err
	}
	n := max(4, runtime.NumCPU())
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	return db, nil
}

// writerDSN builds the writer's connection string. Every setting is a
// connection parameter so it applies to each (re)opened connection.
func writerDSN(abs string, cfg config) string {
	q := url.Values{}
	q.Set("_journal_mode", "WAL")
	q.Set("_busy_timeout", strconv.Itoa(busyTimeoutMS))
	q.Set("_foreign_keys", "on")
	q.Set("_synchronous", cfg.synchronous)
	q.Set("_txlock", cfg.txLock)
	q.Set("_stmt_cache_size", "64")
	return fileURI(abs, q)
}

// readerDSN opens with mode=ro, so a bug cannot write through a reader and
// the CLI never changes the host's database.
func readerDSN(abs string) string {
	q := url.Values{}
	q.Set("mode", "ro")
	q.Set("_busy_timeout", strconv.Itoa(busyTimeoutMS))
	q.Set("_foreign_keys", "on")
	q.Set("_stmt_cache_size", "64")
	return fileURI(abs, q)
}

// fileURI escapes the path so names with '?', '#' or '%' stay file names.
func fileURI(abs string, q url.Values) string {
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs), RawQuery: q.Encode()}
	return u.String()
}

// Path is the database file the store was opened on.
func (s *Store) Path() string { return s.path }

// Close optimizes the query planner statistics and closes the connections;
// the last connection to close checkpoints the WAL into the main file.
func (s *Store) Close() error {
	var errs []error
	if s.reader != nil {
		errs = append(errs, s.reader.Close())
	}
	if s.writer != nil {
		// Best effort: statistics only make later queries faster.
		_, _ = s.writer.Exec("PRAGMA optimize")
		errs = append(errs, s.writer.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close store %s: %w", s.path, err)
	}
	return nil
}

// write runs fn in one write transaction (BEGIN IMMEDIATE on the single
// writer connection). fn must not use the store's other methods: the only
// writer connection is the one it holds.
func (s *Store) write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	if s.writer == nil {
		return ErrReadOnly
	}
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// queryer is what read helpers need: a reader pool or a write transaction.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// isConstraint reports whether err is the given SQLite constraint violation.
func isConstraint(err error, code sqlite3.ErrNoExtended) bool {
	var se sqlite3.Error
	return errors.As(err, &se) && se.ExtendedCode == code
}
