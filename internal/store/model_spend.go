package store

import (
	"context"
	"fmt"

	"nanohost/internal/gateway"
)

// What the model gateway metered, per UTC day, group and model
// (gateway.Ledger): the group/day and daily budgets count from here, so a
// restart does not reset them, and replicas sharing PostgreSQL share them.

// AddModelSpend adds one call's usage (priced, or one of UnpricedCalls) to
// what group spent on model on day.
func (s *Store) AddModelSpend(ctx context.Context, day, group, model string, u gateway.Usage) error {
	err := s.write(ctx, func(tx *txn) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO model_spend (day, group_folder, model, calls, unpriced_calls,
			input_tokens, output_tokens, cache_write_tokens, cache_read_tokens, cost_usd)
			VALUES (?, ?, ?, 1, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (day, group_folder, model) DO UPDATE SET
				calls = model_spend.calls + 1,
				unpriced_calls = model_spend.unpriced_calls + excluded.unpriced_calls,
				input_tokens = model_spend.input_tokens + excluded.input_tokens,
				output_tokens = model_spend.output_tokens + excluded.output_tokens,
				cache_write_tokens = model_spend.cache_write_tokens + excluded.cache_write_tokens,
				cache_read_tokens = model_spend.cache_read_tokens + excluded.cache_read_tokens,
				cost_usd = model_spend.cost_usd + excluded.cost_usd`,
			day, group, model, u.UnpricedCalls, u.InputTokens, u.OutputTokens, u.CacheWrite, u.CacheRead, u.CostUSD)
		return err
	})
	if err != nil {
		return fmt.Errorf("record model spend of %s on %s: %w", group, day, err)
	}
	return nil
}

// ModelSpend is what group spent on day, and what all groups together did.
func (s *Store) ModelSpend(ctx context.Context, day, group string) (groupSpent, all gateway.Usage, err error) {
	rows, err := s.reader.QueryContext(ctx, `SELECT group_folder, CAST(SUM(unpriced_calls) AS BIGINT),
		CAST(SUM(input_tokens) AS BIGINT), CAST(SUM(output_tokens) AS BIGINT), CAST(SUM(cache_write_tokens) AS BIGINT),
		CAST(SUM(cache_read_tokens) AS BIGINT), SUM(cost_usd)
		FROM model_spend WHERE day = ? GROUP BY group_folder`, day)
	if err != nil {
		return groupSpent, all, fmt.Errorf("read model spend on %s: %w", day, err)
	}
	defer rows.Close()
	for rows.Next() {
		var folder string
		var u gateway.Usage
		if err := rows.Scan(&folder, &u.UnpricedCalls, &u.InputTokens, &u.OutputTokens, &u.CacheWrite, &u.CacheRead, &u.CostUSD); err != nil {
			return groupSpent, all, fmt.Errorf("read model spend on %s: %w", day, err)
		}
		if folder == group {
			groupSpent = u
		}
		all = all.Add(u)
	}
	if err := rows.Err(); err != nil {
		return groupSpent, all, fmt.Errorf("read model spend on %s: %w", day, err)
	}
	return groupSpent, all, nil
}
