package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// PostgreSQL, for several host replicas sharing one database
// (docs/scaling.md), through jackc/pgx: its database/sql driver for the
// store's queries (the same code as on SQLite), and a connection of its own
// for LISTEN/NOTIFY (notify.go).
//
// Transactions run at READ COMMITTED. Every change the store makes is one
// statement whose WHERE clause is its precondition (a gate answered only
// while open with that nonce, a run finished only once, a lease taken only
// when free), which PostgreSQL re-checks against the row as it is when the
// statement gets its lock; the few read-then-write transactions lock the
// row they read first (forUpdate). Times are timestamptz (microseconds).

// postgresMigrations holds PostgreSQL's schema history: the same versions
// as SQLite's, with the same meaning.
//
//go:embed migrations/postgres/*.sql
var postgresMigrations embed.FS

// migrationLock is the advisory lock key every migrating process takes.
const migrationLock = 8377_0016

// pgPoolSize bounds a replica's connections (the notification listener
// has one more of its own).
const pgPoolSize = 12

type postgresBackend struct{ placeholders *dollarPlaceholders }

func (postgresBackend) name() string             { return "postgres" }
func (postgresBackend) shared() bool             { return true }
func (b postgresBackend) rebind(q string) string { return b.placeholders.rebind(q) }
func (postgresBackend) forUpdate() string        { return " FOR UPDATE" }
func (postgresBackend) groupCommits() bool       { return false }
func (postgresBackend) noLimit() any             { return nil } // LIMIT NULL: all rows
func (postgresBackend) leaseNow() string         { return `now()` }
func (postgresBackend) leaseExpiry() string      { return `now() + ? * interval '1 millisecond'` }

func (postgresBackend) migrations() fs.FS {
	sub, err := fs.Sub(postgresMigrations, "migrations/postgres")
	if err != nil {
		panic(err) // the embedded directory is there: a build problem
	}
	return sub
}

func (postgresBackend) lockMigrations(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLock)
	return err
}

func (b postgresBackend) hasTable(ctx context.Context, q queryer, name string) (bool, error) {
	var n int
	err := q.QueryRowContext(ctx, `SELECT count(*) FROM pg_catalog.pg_tables
		WHERE schemaname = current_schema() AND tablename = ?`, name).Scan(&n)
	return n > 0, err
}

func (postgresBackend) violation(err error) (violationKind, string) {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return noViolation, ""
	}
	switch pe.Code {
	case "23505":
		if strings.HasSuffix(pe.ConstraintName, "_pkey") {
			return primaryKeyViolation, pe.ConstraintName
		}
		return uniqueViolation, pe.ConstraintName
	case "23503":
		return foreignKeyViolation, pe.ConstraintName
	case "23514":
		return checkViolation, pe.ConstraintName
	}
	return noViolation, ""
}

// openPostgres connects to the database at dsn (a postgres:// URL, with
// any libpq parameters) and, unless readOnly, migrates it.
func openPostgres(ctx context.Context, dsn string, readOnly bool) (*Store, error) {
	shown := redactURL(dsn)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", shown, err)
	}
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	if cfg.RuntimeParams["application_name"] == "" {
		cfg.RuntimeParams["application_name"] = "nanohost"
	}
	cfg.RuntimeParams["timezone"] = "UTC"
	if readOnly {
		cfg.RuntimeParams["default_transaction_read_only"] = "on"
	}
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(pgPoolSize)
	db.SetMaxIdleConns(pgPoolSize)
	b := postgresBackend{placeholders: &dollarPlaceholders{}}
	c := &conn{db: db, b: b, health: &writeHealth{b: b}}
	s := &Store{path: shown, b: b, reader: c}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", shown, err)
	}
	if readOnly {
		if err := s.checkSchema(ctx); err != nil {
			db.Close()
			return nil, fmt.Errorf("open store %s: %w", shown, err)
		}
		return s, nil
	}
	s.writer = c
	ms, err := loadMigrations(b.migrations())
	if err == nil {
		err = migrate(ctx, b, db, ms)
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", shown, err)
	}
	s.pg = &pgExtras{connConfig: cfg}
	return s, nil
}

// redactURL is dsn without its password, for messages and logs.
func redactURL(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "postgres://…"
	}
	return u.Redacted()
}

// pgExtras is what only a PostgreSQL store has: the settings for the
// notification listener's own connection.
type pgExtras struct {
	connConfig *pgx.ConnConfig
}

func (p *pgExtras) close() error { return nil }
