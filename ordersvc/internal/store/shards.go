package store

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// ShardsOf returns the lookup stock.WithShards needs: how many Redis shards
// hold a sale's stock. Each answer is cached for the life of the process,
// since a sale's shard count never changes; a failed read is not cached and
// fails the stock call that asked.
func (s *Store) ShardsOf(timeout time.Duration) func(saleID int64) (int, error) {
	var cache sync.Map // sale id -> int
	return func(saleID int64) (int, error) {
		if n, ok := cache.Load(saleID); ok {
			return n.(int), nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		var n int
		err := s.pool.QueryRow(ctx, `SELECT stock_shards FROM flash_sale WHERE id = $1`, saleID).Scan(&n)
		if err != nil {
			return 0, fmt.Errorf("read stock shards of sale %d: %w", saleID, err)
		}
		cache.Store(saleID, n)
		return n, nil
	}
}
