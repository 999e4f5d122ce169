package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Delivery claims: the one deliverer of a run's chat thread (see
// runs.Store.ClaimDelivery). A claim is a compare-and-set on the run's row,
// so of replicas claiming at once exactly one wins; times come from the
// claiming replica's clock, so replicas' clocks should agree to well
// within the claim's TTL (NTP does).

// ClaimDelivery makes replica the deliverer of the run's thread for ttl if
// nobody holds the claim, its holder's has run out, or replica holds it
// already (a renewal). holder is who holds it after the call. A finished
// run can be claimed too (what it left undelivered still goes out).
func (s *Store) ClaimDelivery(ctx context.Context, runID, replica string, ttl time.Duration) (ok bool, holder string, err error) {
	if replica == "" || ttl <= 0 {
		return false, "", fmt.Errorf("claim delivery of run %s: a replica name and a positive TTL are required", runID)
	}
	now := time.Now()
	err = s.write(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `UPDATE runs SET delivery_by = ?, delivery_until = ?
			WHERE id = ? AND (delivery_by = '' OR delivery_by = ? OR delivery_until IS NULL OR delivery_until < ?)`,
			replica, encTime(now.Add(ttl)), runID, replica, encTime(now))
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		ok = n == 1
		err = tx.QueryRowContext(ctx, `SELECT delivery_by FROM runs WHERE id = ?`, runID).Scan(&holder)
		if errors.Is(err, sql.ErrNoRows) {
			return runNotFound(runID)
		}
		return err
	})
	if err != nil {
		return false, "", fmt.Errorf("claim delivery of run %s: %w", runID, err)
	}
	return ok, holder, nil
}

// ReleaseDelivery gives up replica's claim on the run's thread (a claim
// held by another is left alone).
func (s *Store) ReleaseDelivery(ctx context.Context, runID, replica string) error {
	err := s.write(ctx, func(tx *txn) error {
		_, err := tx.ExecContext(ctx, `UPDATE runs SET delivery_by = '', delivery_until = NULL
			WHERE id = ? AND delivery_by = ?`, runID, replica)
		return err
	})
	if err != nil {
		return fmt.Errorf("release delivery of run %s: %w", runID, err)
	}
	return nil
}

// ClaimInbound records that replica handles the inbound chat envelope
// named key (a transport's event or trigger id). first is true for the
// first claim of key, whoever made it: only that replica handles it.
func (s *Store) ClaimInbound(ctx context.Context, key, replica string) (first bool, err error) {
	err = s.write(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO inbound_claims (key, replica, claimed_at) VALUES (?, ?, ?)
			ON CONFLICT (key) DO NOTHING`, key, replica, encTime(time.Now()))
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		first = n == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("claim inbound %s: %w", key, err)
	}
	return first, nil
}

// PruneInboundClaims forgets claims made before cutoff (a chat redelivers
// an event within minutes, never days) and returns how many it removed.
func (s *Store) PruneInboundClaims(ctx context.Context, cutoff time.Time) (int, error) {
	var n int64
	err := s.write(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM inbound_claims WHERE claimed_at < ?`, encTime(cutoff))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("prune inbound claims: %w", err)
	}
	return int(n), nil
}
