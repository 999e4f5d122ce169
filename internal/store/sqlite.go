package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/mattn/go-sqlite3"
)

// SQLite, the embedded default: one file.
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
//
// Times are UTC text in a fixed-width RFC 3339 layout with nanoseconds
// (sqltime.go): readable in the sqlite3 shell, ordered by plain string
// comparison.

// sqliteMigrations holds SQLite's schema history. Never edit a released
// file: add a new one (and its PostgreSQL twin).
//
//go:embed migrations/sqlite/*.sql
var sqliteMigrations embed.FS

// busyTimeoutMS bounds how long a connection waits for a lock held by
// another process before failing with SQLITE_BUSY.
const busyTimeoutMS = 5000

// config is how the connections are set up. Only benchmarks and tests
// change it, to measure the alternatives the defaults were chosen over.
type config struct {
	writerConns int    // max open writer connections
	txLock      string // "immediate" or "deferred"
	synchronous string // "NORMAL" or "FULL"
}

var defaultConfig = config{writerConns: 1, txLock: "immediate", synchronous: "NORMAL"}

// sqliteBackend is the SQLite dialect.
type sqliteBackend struct{}

func (sqliteBackend) name() string           { return "sqlite" }
func (sqliteBackend) shared() bool           { return false }
func (sqliteBackend) rebind(q string) string { return q }
func (sqliteBackend) forUpdate() string      { return "" } // the write transaction holds the database
func (sqliteBackend) groupCommits() bool     { return true }
func (sqliteBackend) noLimit() any           { return -1 }

// sqliteNowMillis is SQLite's clock in milliseconds since 1970.
const sqliteNowMillis = `CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)`

func (sqliteBackend) leaseNow() string    { return sqliteNowMillis }
func (sqliteBackend) leaseExpiry() string { return `(` + sqliteNowMillis + ` + ?)` }

func (sqliteBackend) migrations() fs.FS {
	sub, err := fs.Sub(sqliteMigrations, "migrations/sqlite")
	if err != nil {
		panic(err) // the embedded directory is there: a build problem
	}
	return sub
}

func (sqliteBackend) lockMigrations(context.Context, *sql.Tx) error { return nil }

func (sqliteBackend) hasTable(ctx context.Context, q queryer, name string) (bool, error) {
	var n int
	err := q.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?`, name).Scan(&n)
	return n > 0, err
}

func (sqliteBackend) violation(err error) (violationKind, string) {
	var se sqlite3.Error
	if !errors.As(err, &se) {
		return noViolation, ""
	}
	// "UNIQUE constraint failed: groups.is_main": the columns name it.
	_, constraint, _ := strings.Cut(se.Error(), "failed: ")
	switch se.ExtendedCode {
	case sqlite3.ErrConstraintPrimaryKey:
		return primaryKeyViolation, constraint
	case sqlite3.ErrConstraintUnique:
		return uniqueViolation, constraint
	case sqlite3.ErrConstraintForeignKey:
		return foreignKeyViolation, constraint
	case sqlite3.ErrConstraintCheck:
		return checkViolation, constraint
	}
	return noViolation, ""
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
	b := sqliteBackend{}
	s := &Store{path: path, b: b, writer: &conn{db: writer, b: b, health: &writeHealth{b: b}}}
	if err := s.initSQLiteWriter(ctx); err != nil {
		writer.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	// The reader pool opens after the writer created the file and its WAL.
	reader, err := openSQLiteReader(abs)
	if err != nil {
		writer.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	s.reader = &conn{db: reader, b: b}
	return s, nil
}

func (s *Store) initSQLiteWriter(ctx context.Context) error {
	var mode string
	if err := s.writer.db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	if mode != "wal" {
		return fmt.Errorf("journal_mode is %q, want wal (is the file on a filesystem without shared memory?)", mode)
	}
	ms, err := loadMigrations(s.b.migrations())
	if err != nil {
		return err
	}
	return migrate(ctx, s.b, s.writer.db, ms)
}

// openSQLiteReadOnly opens an existing SQLite file for reading only.
func openSQLiteReadOnly(ctx context.Context, path string) (*Store, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	if _, err := os.Stat(abs); err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	reader, err := openSQLiteReader(abs)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	b := sqliteBackend{}
	s := &Store{path: path, b: b, reader: &conn{db: reader, b: b}}
	if err := s.checkSchema(ctx); err != nil {
		reader.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return s, nil
}

func openSQLiteReader(abs string) (*sql.DB, error) {
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
