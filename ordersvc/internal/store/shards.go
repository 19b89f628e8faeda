package store

import (
	"context"
	"fmt"
	"time"
)

// ShardsOf returns the lookup stock.WithShards needs: how many Redis shards
// hold a sale's stock. Each answer is cached for the life of the store,
// since a sale's shard count never changes; a failed read is not cached and
// fails the stock call that asked. DrainReleases learns the counts of the
// sales it claims rows of in its own transaction, so a release inside it
// never asks the pool for a second connection (with every connection held
// by a drain, each waited for another until the lookup's timeout).
func (s *Store) ShardsOf(timeout time.Duration) func(saleID int64) (int, error) {
	return func(saleID int64) (int, error) {
		if n, ok := s.shards.Load(saleID); ok {
			return n.(int), nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		var n int
		err := s.pool.QueryRow(ctx, `SELECT stock_shards FROM flash_sale WHERE id = $1`, saleID).Scan(&n)
		if err != nil {
			return 0, fmt.Errorf("read stock shards of sale %d: %w", saleID, err)
		}
		s.shards.Store(saleID, n)
		return n, nil
	}
}
