package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"nanohost/internal/lease"
	"nanohost/internal/runs"
)

// Leases (internal/lease): one table, leases, of rows (kind, key, owner,
// expiry) for everything one process at a time holds — a run to drive, a
// group's chat conversation, a run's thread to deliver. A lease is renewed
// by its owner; one past its expiry may be taken by anyone. Expiry is on
// the database's clock, so processes' clocks need not agree. Every change
// is one statement whose WHERE clause is its precondition, so of two
// processes racing for a lease exactly one wins.
//
// On SQLite the one host drives every run and holds every group: nobody
// takes those leases there (the runs service and the chat router keep
// them only among replicas), but the host and the command line share the
// deliveries of run threads through it.

// takeSQL inserts a lease (kind, key, owner, ttl in milliseconds), or
// takes over the stored one when it is owner's already or expired; it
// affects no row when another's lease is live.
func (s *Store) takeSQL() string {
	return `INSERT INTO leases (kind, key, owner, expires_at) VALUES (?, ?, ?, ` + s.b.leaseExpiry() + `)
	ON CONFLICT (kind, key) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
	WHERE leases.owner = excluded.owner OR leases.expires_at < ` + s.b.leaseNow()
}

// TakeLease makes owner the holder of the lease for ttl when it is free,
// expired, or owner's already (lease.Store). holder is who holds it after
// the call: owner when taken.
func (s *Store) TakeLease(ctx context.Context, id lease.ID, owner string, ttl time.Duration) (holder string, err error) {
	err = s.write(ctx, func(tx *txn) error {
		if _, err := tx.ExecContext(ctx, s.takeSQL(), id.Kind, id.Key, owner, ttl.Milliseconds()); err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `SELECT owner FROM leases WHERE kind = ? AND key = ?`, id.Kind, id.Key).Scan(&holder)
	})
	if err != nil {
		return "", fmt.Errorf("take the lease of %s: %w", id, err)
	}
	return holder, nil
}

// RenewLease extends owner's lease by ttl from now (lease.Store); held is
// false when another took it over: owner must stop acting for the thing
// at once, writing nothing more (fencing). A lease that expired but was
// not taken is still owner's, and renewed.
func (s *Store) RenewLease(ctx context.Context, id lease.ID, owner string, ttl time.Duration) (held bool, err error) {
	var n int64
	err = s.write(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `UPDATE leases SET expires_at = `+s.b.leaseExpiry()+`
			WHERE kind = ? AND key = ? AND owner = ?`, ttl.Milliseconds(), id.Kind, id.Key, owner)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return false, fmt.Errorf("renew the lease of %s: %w", id, err)
	}
	return n == 1, nil
}

// renewBatch is how many leases one RenewLeases statement renews.
const renewBatch = 500

// RenewLeases is RenewLease of many of owner's leases at once, one statement
// for up to renewBatch of them, and returns those that are still owner's
// (lease.BatchRenewer): a host with a thousand runs waiting at gates renews
// their leases in two statements, not a thousand.
func (s *Store) RenewLeases(ctx context.Context, ids []lease.ID, owner string, ttl time.Duration) (map[lease.ID]bool, error) {
	held := make(map[lease.ID]bool, len(ids))
	for chunk := range slices.Chunk(ids, renewBatch) {
		args := make([]any, 0, 2+2*len(chunk))
		args = append(args, ttl.Milliseconds(), owner)
		pairs := make([]string, len(chunk))
		for i, id := range chunk {
			pairs[i] = "(?, ?)"
			args = append(args, string(id.Kind), id.Key)
		}
		err := s.write(ctx, func(tx *txn) error {
			rows, err := tx.QueryContext(ctx, `UPDATE leases SET expires_at = `+s.b.leaseExpiry()+`
				WHERE owner = ? AND (kind, key) IN (`+strings.Join(pairs, ", ")+`) RETURNING kind, key`, args...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var kind, key string
				if err := rows.Scan(&kind, &key); err != nil {
					return err
				}
				held[lease.ID{Kind: lease.Kind(kind), Key: key}] = true
			}
			return rows.Err()
		})
		if err != nil {
			return nil, fmt.Errorf("renew %d leases: %w", len(chunk), err)
		}
	}
	return held, nil
}

// ReleaseLease gives up owner's lease (lease.Store): anyone may take it at
// once. A lease another holds is left alone.
func (s *Store) ReleaseLease(ctx context.Context, id lease.ID, owner string) error {
	err := s.write(ctx, func(tx *txn) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM leases WHERE kind = ? AND key = ? AND owner = ?`, id.Kind, id.Key, owner)
		return err
	})
	if err != nil {
		return fmt.Errorf("release the lease of %s: %w", id, err)
	}
	return nil
}

// ClaimRuns takes for owner, for ttl, the leases of up to limit unfinished
// runs nobody drives — their lease expired (their replica died) or they
// have none (their replica stopped and let go, or it died between
// recording a run and taking its lease) — and returns those runs with
// their source, oldest first, to be resumed. Runs of the command line
// (runs.TerminalChat) are never claimed: the process that runs them is not
// a replica. Replicas scanning at once skip each other's rows (FOR UPDATE
// SKIP LOCKED) rather than wait; each run goes to one of them.
func (s *Store) ClaimRuns(ctx context.Context, owner string, ttl time.Duration, limit int) ([]runs.Run, error) {
	list, err := s.claim(ctx, owner, ttl, limit, `l.key IS NULL OR l.expires_at < now()`)
	if err != nil {
		return nil, fmt.Errorf("claim runs nobody drives: %w", err)
	}
	return list, nil
}

// ReclaimRuns is, for a replica starting again with the same id, the
// unfinished runs whose lease is still its own (from its previous life):
// it resumes them at once instead of waiting for the leases to expire.
func (s *Store) ReclaimRuns(ctx context.Context, owner string, ttl time.Duration) ([]runs.Run, error) {
	list, err := s.claim(ctx, owner, ttl, 0, `l.owner = ?`, owner)
	if err != nil {
		return nil, fmt.Errorf("reclaim %s's runs: %w", owner, err)
	}
	return list, nil
}

// claim takes for owner the leases of up to limit (<= 0: all) unfinished
// runs, not the command line's, whose lease row l (NULL when none)
// satisfies cond, and returns them with their source, oldest first.
func (s *Store) claim(ctx context.Context, owner string, ttl time.Duration, limit int, cond string, args ...any) ([]runs.Run, error) {
	if !s.Capabilities().Replicas {
		return nil, nil
	}
	var claimed []runs.Run
	err := s.write(ctx, func(tx *txn) error {
		rows, err := tx.QueryContext(ctx, `SELECT `+qualified("r", runColumns)+`, r.source_dot
			FROM runs r LEFT JOIN leases l ON l.kind = 'run' AND l.key = r.id
			WHERE r.status IN ('queued', 'running', 'waiting', 'interrupted') AND r.chat_id <> ? AND (`+cond+`)
			ORDER BY r.created_at, r.id LIMIT ? FOR UPDATE OF r SKIP LOCKED`,
			append(append([]any{runs.TerminalChat}, args...), s.limit(limit))...)
		if err != nil {
			return err
		}
		var found []runs.Run
		for rows.Next() {
			var dot string
			r, err := scanRun(rows, &dot)
			if err != nil {
				rows.Close()
				return err
			}
			r.SourceDOT = dot
			found = append(found, r)
		}
		if err := rows.Close(); err != nil {
			return err
		}
		for _, r := range found {
			res, err := tx.ExecContext(ctx, s.takeSQL(), lease.Run, r.ID, owner, ttl.Milliseconds())
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n == 1 {
				claimed = append(claimed, r)
			}
		}
		return nil
	})
	return claimed, err
}

// LeaseOwners maps each unfinished run with a live lease to the replica
// driving it (empty on SQLite, whose one host drives every run). A run
// that just ended has none, though its lease may outlive it a moment.
func (s *Store) LeaseOwners(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	if !s.Capabilities().Replicas {
		return out, nil
	}
	rows, err := s.reader.QueryContext(ctx, `SELECT l.key, l.owner FROM leases l JOIN runs r ON l.kind = 'run' AND r.id = l.key
		WHERE l.expires_at >= now() AND r.status IN ('queued', 'running', 'waiting', 'interrupted')`)
	if err != nil {
		return nil, fmt.Errorf("lease owners: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var run, owner string
		if err := rows.Scan(&run, &owner); err != nil {
			return nil, fmt.Errorf("lease owners: %w", err)
		}
		out[run] = owner
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("lease owners: %w", err)
	}
	return out, nil
}

// fillOwner sets the Owner of run when a replica drives it: its own lease
// only (reading every run's, as fillOwners does, made each GetRun cost in
// proportion to the runs in flight).
func (s *Store) fillOwner(ctx context.Context, run *runs.Run) error {
	if !s.Capabilities().Replicas || run.Status.Finished() {
		return nil
	}
	err := s.reader.QueryRowContext(ctx, `SELECT owner FROM leases
		WHERE kind = 'run' AND key = ? AND expires_at >= now()`, run.ID).Scan(&run.Owner)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	return err
}

// fillOwners sets the Owner of each of list that a replica drives.
func (s *Store) fillOwners(ctx context.Context, list []runs.Run) error {
	if !s.Capabilities().Replicas || len(list) == 0 {
		return nil
	}
	owners, err := s.LeaseOwners(ctx)
	if err != nil {
		return err
	}
	for i := range list {
		list[i].Owner = owners[list[i].ID]
	}
	return nil
}

// LeasesOf lists the runs whose live lease owner holds, in id order.
func (s *Store) LeasesOf(ctx context.Context, owner string) ([]string, error) {
	all, err := s.LeaseOwners(ctx)
	if err != nil {
		return nil, err
	}
	var ids []string
	for run, o := range all {
		if o == owner {
			ids = append(ids, run)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// qualified prefixes each of a comma-separated column list with table.
func qualified(table, columns string) string {
	cols := strings.Split(columns, ",")
	for i, c := range cols {
		cols[i] = table + "." + strings.TrimSpace(c)
	}
	return strings.Join(cols, ", ")
}
