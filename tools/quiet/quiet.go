// Package quiet lets a load test start on a quiet stack: it waits until the
// order service has worked off what earlier sales have falling due, so that
// one sale's figures are not another sale's expiry.
package quiet

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Horizon is how far ahead the backlog looks: orders falling due
// within it would expire while this run mints its crowd (a few seconds for
// 500,000 shoppers), opens its sale (-open-in) and sells.
const Horizon = 15 * time.Second

// backlogSQL counts the work earlier sales leave the order service for the
// coming seconds: PENDING orders whose payment window closes before now +
// $1 seconds (each becomes an UPDATE, a stock_release row and a Redis
// release when the order service expires it) and releases not yet
// applied. Both are read through partial indexes.
const backlogSQL = `SELECT
	(SELECT count(*) FROM flash_sale_order WHERE status = 'PENDING' AND expires_at < now() + make_interval(secs => $1)) +
	(SELECT count(*) FROM stock_release WHERE released_at IS NULL)`

// Backlog counts that work in pool's database.
func Backlog(pool *pgxpool.Pool) func(context.Context) (int64, error) {
	return func(ctx context.Context) (int64, error) {
		var n int64
		if err := pool.QueryRow(ctx, backlogSQL, Horizon.Seconds()).Scan(&n); err != nil {
			return 0, fmt.Errorf("count the earlier sales' backlog: %w", err)
		}
		return n, nil
	}
}

// Wait waits, up to bound, until count says the order service has
// worked off the backlog of earlier sales, so that expiring their orders
// does not run during this sale and enter its figures. (Every demo leaves
// 10,000 PENDING orders that expire ten minutes later, all within a second
// or two: a demo run ten minutes after another sold while the order service
// expired the first one's orders, and every component's CPU per order rose
// by half or more.) It returns the backlog left when it stopped waiting; 0
// is a quiet stack. bound 0 only counts.
func Wait(ctx context.Context, count func(context.Context) (int64, error), bound, poll time.Duration, progress io.Writer) (int64, error) {
	n, err := count(ctx)
	if err != nil || n == 0 || bound == 0 {
		return n, err
	}
	start := time.Now()
	deadline := start.Add(bound)
	fmt.Fprintf(progress, "quiet: %d orders and releases of earlier sales are due within %s; waiting up to %s for the order service to work them off (-quiet-wait)\n",
		n, Horizon, bound)
	said := start
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return n, ctx.Err()
		case <-time.After(poll):
		}
		left, err := count(ctx)
		if err != nil {
			return n, err // the last backlog counted
		}
		if n = left; n == 0 {
			fmt.Fprintf(progress, "quiet: done in %s\n", time.Since(start).Round(100*time.Millisecond))
			return 0, nil
		}
		if time.Since(said) >= 5*time.Second {
			fmt.Fprintf(progress, "quiet: %d left\n", n)
			said = time.Now()
		}
	}
	fmt.Fprintf(progress, "quiet: %d still due after %s; the sale starts anyway and the report says so\n", n, bound)
	return n, nil
}
