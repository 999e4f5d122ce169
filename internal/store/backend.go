package store

import (
	"context"
	"database/sql"
	"io/fs"
	"strconv"
	"strings"
	"sync"
)

// backend is what differs between the databases the store runs on: how to
// connect, the schema history, a few SQL spellings and how constraint
// violations are reported. Everything else — every query, every rule about
// runs, gates and messages — is the store's own and the same on both, so
// the same tests hold for both (docs/scaling.md says why one store over
// database/sql rather than two copies of it).
type backend interface {
	// name is "sqlite" or "postgres".
	name() string
	// shared says whether several processes on several machines may use
	// the database at once (host replicas).
	shared() bool
	// rebind rewrites a query written with ? placeholders into the
	// database's own.
	rebind(query string) string
	// violation classifies a constraint violation (none: not one).
	violation(err error) (kind violationKind, constraint string)
	// migrations holds the schema history, NNNN_description.sql.
	migrations() fs.FS
	// lockMigrations serialises schema changes between processes opening
	// the database at once (SQLite's write transaction already does).
	lockMigrations(ctx context.Context, tx *sql.Tx) error
	// hasTable reports whether the schema has table name.
	hasTable(ctx context.Context, q queryer, name string) (bool, error)
	// forUpdate is the suffix that locks the rows a SELECT reads until the
	// transaction ends ("" where a write transaction already excludes others).
	forUpdate() string
	// groupCommits says whether small writes share commits (groupcommit.go):
	// where one connection writes (SQLite) they queue for it anyway; where
	// a pool writes in parallel (PostgreSQL, whose server groups its WAL
	// flushes itself) sharing would only put them in a line.
	groupCommits() bool
	// noLimit is the LIMIT argument that means "all rows".
	noLimit() any
	// leaseNow is the database's clock as leases.expires_at holds it, and
	// leaseExpiry that clock plus a ? number of milliseconds.
	leaseNow() string
	leaseExpiry() string
}

// violationKind is a kind of constraint violation.
type violationKind int

const (
	noViolation violationKind = iota
	primaryKeyViolation
	uniqueViolation
	foreignKeyViolation
	checkViolation
)

// conn is a connection pool that speaks the store's query dialect (?
// placeholders) whatever the backend.
type conn struct {
	db *sql.DB
	b  backend
	// health, on the writer, records how its writes went.
	health *writeHealth
}

func (c *conn) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	res, err := c.db.ExecContext(ctx, c.b.rebind(query), args...)
	c.health.note(err)
	return res, err
}

func (c *conn) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return c.db.QueryContext(ctx, c.b.rebind(query), args...)
}

func (c *conn) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return c.db.QueryRowContext(ctx, c.b.rebind(query), args...)
}

// txn is a transaction that speaks the store's query dialect.
type txn struct {
	tx *sql.Tx
	b  backend
}

func (t *txn) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return t.tx.ExecContext(ctx, t.b.rebind(query), args...)
}

func (t *txn) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return t.tx.QueryContext(ctx, t.b.rebind(query), args...)
}

func (t *txn) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return t.tx.QueryRowContext(ctx, t.b.rebind(query), args...)
}

// queryer is what read helpers need: a pool or a write transaction.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// execer is what a single statement needs: a pool or a transaction.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// dollarPlaceholders rewrites ? into $1, $2, … (PostgreSQL). The store's
// queries hold no ? inside string literals; each query is rewritten once.
type dollarPlaceholders struct{ cache sync.Map }

func (d *dollarPlaceholders) rebind(q string) string {
	if v, ok := d.cache.Load(q); ok {
		return v.(string)
	}
	var b strings.Builder
	b.Grow(len(q) + 16)
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(q[i])
	}
	out := b.String()
	d.cache.Store(q, out)
	return out
}
