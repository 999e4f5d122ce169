package store

import (
	"context"
	"fmt"
	"time"
)

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
