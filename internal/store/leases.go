package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"nanohost/internal/runs"
)

// Run leases: which replica drives each run when several share a
// PostgreSQL store (docs/scaling.md); group leases, by the same
// statements: which replica holds each group's chat conversation. A lease is a row (run, owner,
// expiry) that its owner renews; one past its expiry may be taken by any
// replica. Expiry is on the database's clock, so replicas' clocks need not
// agree. Every change is one statement whose WHERE clause is its
// precondition, so of two replicas racing for a lease exactly one wins.
//
// On SQLite the one host drives every run: leases are trivially its own,
// and nothing is stored.

// leaseTable is a table of leases: one row (key, owner, expiry) per thing
// one replica at a time holds — a run (run_leases) or a group's chat
// conversation (group_leases). Both kinds behave alike, by the same
// statements.
type leaseTable struct{ table, key, what string }

var (
	runLeases   = leaseTable{table: "run_leases", key: "run_id", what: "run"}
	groupLeases = leaseTable{table: "group_leases", key: "group_folder", what: "group"}
)

// takeSQL inserts a lease (key, owner, ttl in milliseconds), or takes
// over the stored one when it is owner's already or expired; it affects
// no row when another replica's lease is live.
func (l leaseTable) takeSQL() string {
	return `INSERT INTO ` + l.table + ` (` + l.key + `, owner, expires_at)
	VALUES (?, ?, now() + ? * interval '1 millisecond')
	ON CONFLICT (` + l.key + `) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
	WHERE ` + l.table + `.owner = excluded.owner OR ` + l.table + `.expires_at < now()`
}

// take makes owner the holder of key's lease for ttl, when it is free,
// expired, or owner's already.
func (l leaseTable) take(ctx context.Context, s *Store, key, owner string, ttl time.Duration) (taken bool, err error) {
	if !s.Shared() {
		return true, nil
	}
	var n int64
	err = s.write(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, l.takeSQL(), key, owner, ttl.Milliseconds())
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return false, fmt.Errorf("take the lease of %s %s: %w", l.what, key, err)
	}
	return n == 1, nil
}

// renew extends owner's lease on key by ttl from now; held is false when
// another replica took it over.
func (l leaseTable) renew(ctx context.Context, s *Store, key, owner string, ttl time.Duration) (held bool, err error) {
	if !s.Shared() {
		return true, nil
	}
	res, err := s.writer.ExecContext(ctx, `UPDATE `+l.table+` SET expires_at = now() + ? * interval '1 millisecond'
		WHERE `+l.key+` = ? AND owner = ?`, ttl.Milliseconds(), key, owner)
	if err != nil {
		return false, fmt.Errorf("renew the lease of %s %s: %w", l.what, key, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("renew the lease of %s %s: %w", l.what, key, err)
	}
	return n == 1, nil
}

// release gives up owner's lease on key.
func (l leaseTable) release(ctx context.Context, s *Store, key, owner string) error {
	if !s.Shared() {
		return nil
	}
	if _, err := s.writer.ExecContext(ctx, `DELETE FROM `+l.table+` WHERE `+l.key+` = ? AND owner = ?`, key, owner); err != nil {
		return fmt.Errorf("release the lease of %s %s: %w", l.what, key, err)
	}
	return nil
}

// TakeLease makes owner the driver of run runID for ttl, when the run's
// lease is free, expired, or owner's already. taken reports whether owner
// holds it now; false means another replica drives the run.
func (s *Store) TakeLease(ctx context.Context, runID, owner string, ttl time.Duration) (taken bool, err error) {
	return runLeases.take(ctx, s, runID, owner, ttl)
}

// RenewLease extends owner's lease on run runID by ttl from now. held is
// false when the lease is no longer owner's (another replica took it over
// after it expired): owner must stop driving the run at once, writing
// nothing more (fencing). A lease that expired but was not taken is still
// owner's, and renewed.
func (s *Store) RenewLease(ctx context.Context, runID, owner string, ttl time.Duration) (held bool, err error) {
	return runLeases.renew(ctx, s, runID, owner, ttl)
}

// ReleaseLease gives up owner's lease on run runID (its run ended, or its
// replica stops): another replica may take the run at once.
func (s *Store) ReleaseLease(ctx context.Context, runID, owner string) error {
	return runLeases.release(ctx, s, runID, owner)
}

// TakeGroupLease makes owner the holder of group folder's chat
// conversation for ttl — its agent container runs on owner's Docker and
// owner answers its messages — when the group's lease is free, expired,
// or owner's already. On SQLite the one host holds every group.
func (s *Store) TakeGroupLease(ctx context.Context, folder, owner string, ttl time.Duration) (taken bool, err error) {
	return groupLeases.take(ctx, s, folder, owner, ttl)
}

// RenewGroupLease extends owner's lease on group folder; held is false
// when another replica took the conversation over (owner must stop
// answering for the group, and close its container).
func (s *Store) RenewGroupLease(ctx context.Context, folder, owner string, ttl time.Duration) (held bool, err error) {
	return groupLeases.renew(ctx, s, folder, owner, ttl)
}

// ReleaseGroupLease lets group folder's conversation go (owner stops):
// another replica may take it at once.
func (s *Store) ReleaseGroupLease(ctx context.Context, folder, owner string) error {
	return groupLeases.release(ctx, s, folder, owner)
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
	list, err := s.claim(ctx, owner, ttl, limit, `l.run_id IS NULL OR l.expires_at < now()`)
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
	if !s.Shared() {
		return nil, nil
	}
	var claimed []runs.Run
	err := s.write(ctx, func(tx *txn) error {
		rows, err := tx.QueryContext(ctx, `SELECT `+qualified("r", runColumns)+`, r.source_dot
			FROM runs r LEFT JOIN run_leases l ON l.run_id = r.id
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
			res, err := tx.ExecContext(ctx, runLeases.takeSQL(), r.ID, owner, ttl.Milliseconds())
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
	if s.b.name() != "postgres" {
		return out, nil
	}
	rows, err := s.reader.QueryContext(ctx, `SELECT l.run_id, l.owner FROM run_leases l JOIN runs r ON r.id = l.run_id
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

// fillOwners sets the Owner of each of list that a replica drives.
func (s *Store) fillOwners(ctx context.Context, list []runs.Run) error {
	if s.b.name() != "postgres" || len(list) == 0 {
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
